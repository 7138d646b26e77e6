/* The CLI's tables: columns as wide as their widest cell, two spaces
 * apart, a header ">NAME" right-aligned (numbers and sizes); the last
 * column is not padded. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

void table_init(struct table *t, size_t cols, const char *const *headers)
{
	memset(t, 0, sizeof(*t));
	t->cols = cols;
	t->right = calloc(cols, sizeof(bool));
	char **row = calloc(cols, sizeof(char *));
	for (size_t c = 0; row && t->right && c < cols; c++) {
		t->right[c] = headers[c][0] == '>';
		row[c] = (char *)headers[c] + t->right[c];
	}
	table_row_v(t, (const char *const *)row);
	free(row);
}

void table_row_v(struct table *t, const char *const *cells)
{
	if (t->rows == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		char **grown = realloc(t->cells, cap * t->cols * sizeof(char *));
		if (!grown)
			return; /* a row lost to out of memory: nothing better to do here */
		t->cells = grown;
		t->cap = cap;
	}
	for (size_t c = 0; c < t->cols; c++)
		t->cells[t->rows * t->cols + c] = strdup(cells[c] ? cells[c] : "");
	t->rows++;
}

void table_row(struct table *t, ...)
{
	const char *cells[16] = { 0 };
	va_list ap;
	va_start(ap, t);
	for (size_t c = 0; c < t->cols && c < 16; c++)
		cells[c] = va_arg(ap, const char *);
	va_end(ap);
	table_row_v(t, cells);
}

void table_print(struct table *t, FILE *f)
{
	size_t *width = calloc(t->cols, sizeof(size_t));
	for (size_t r = 0; width && r < t->rows; r++)
		for (size_t c = 0; c < t->cols; c++) {
			const char *s = t->cells[r * t->cols + c];
			size_t n = s ? strlen(s) : 0;
			if (n > width[c])
				width[c] = n;
		}
	for (size_t r = 0; width && r < t->rows; r++) {
		/* The padding after a cell goes out only before the next one
		 * that has something in it: no line ends in spaces. */
		size_t pending = 0;
		for (size_t c = 0; c < t->cols; c++) {
			const char *s = t->cells[r * t->cols + c] ?: "";
			size_t n = strlen(s), pad = width[c] - n;
			if (!*s) {
				pending += width[c] + 2;
				continue;
			}
			fprintf(f, "%*s%*s%s", (int)pending, "", t->right[c] ? (int)pad : 0, "", s);
			pending = (t->right[c] ? 0 : pad) + 2;
		}
		fputc('\n', f);
	}
	free(width);
}

void table_free(struct table *t)
{
	for (size_t i = 0; i < t->rows * t->cols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t->right);
	memset(t, 0, sizeof(*t));
}

long long cli_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *or_dash(const char *s)
{
	return s && *s ? s : "-";
}
