/* A short libcove program: a sandbox, a command, a file, a session.
 * Built by `make check` (build/docs-example) and run by its tests:
 *
 *   cc docs/example.c build/libcove.a -Iinclude -ljansson -o example
 *   ./example [SOCKET]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cove.h"

static void print_output(void *arg, int fd, const char *buf, size_t len)
{
	fwrite(buf, 1, len, fd == 1 ? stdout : stderr);
}

static int fail(const char *what, const struct cove_error *e)
{
	fprintf(stderr, "example: %s: %s (%s)\n", what, e->message, e->code);
	return 1;
}

int main(int argc, char **argv)
{
	struct cove_error e;
	struct cove *c;
	if (cove_open(argc > 1 ? argv[1] : COVE_DEFAULT_SOCKET, &c, &e) < 0)
		return fail("connect", &e);

	char id[16];
	if (cove_create(c, "{\"memory\": \"256M\"}", id, &e) < 0)
		return fail("create", &e);

	/* A command, its output streamed as it comes. */
	struct cove_exec_events events = { .on_output = print_output };
	struct cove_exec_result r;
	if (cove_exec(c, id, "{\"cmd\": \"echo hello from $(hostname)\"}", &events, &r, &e) < 0)
		return fail("exec", &e);

	/* A file in, the same file out. */
	const char *text = "written by example.c\n";
	char *back;
	size_t len;
	if (cove_write_file(c, id, "/tmp/note.txt", text, strlen(text), NULL, &e) < 0 ||
	    cove_read_file(c, id, "/tmp/note.txt", &back, &len, &e) < 0)
		return fail("file", &e);
	printf("read back: %s", back);
	free(back);

	/* A session: the cd and the variable are still there for the next command. */
	char session[24], request[128];
	if (cove_session_create(c, id, NULL, session, &e) < 0)
		return fail("session", &e);
	snprintf(request, sizeof(request), "{\"cmd\": \"cd /tmp && N=42\", \"session\": \"%s\"}", session);
	if (cove_exec(c, id, request, NULL, &r, &e) < 0)
		return fail("session exec", &e);
	snprintf(request, sizeof(request), "{\"cmd\": \"echo $N in $PWD\", \"session\": \"%s\"}", session);
	if (cove_exec(c, id, request, &events, &r, &e) < 0)
		return fail("session exec", &e);

	if (cove_delete(c, id, &e) < 0)
		return fail("delete", &e);
	cove_close(c);
	return r.exit_code;
}
