/* Scratch folders of the harnesses that write files (fuzz_layer.c,
 * fuzz_files_tar.c): emptying one, counting what is in one. */
#pragma once
#include <dirent.h>
#include <ftw.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* An nftw callback removing everything (FTW_DEPTH | FTW_PHYS). */
static inline int scratch_rm_all(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* As scratch_rm_all, the folder walked itself kept. */
static inline int scratch_rm_inside(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return ftw->level == 0 ? 0 : scratch_rm_all(path, st, flag, ftw);
}

/* The number of entries in dir, or -1 when it cannot be read. */
static inline int scratch_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)))
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	if (d)
		closedir(d);
	return d ? n : -1;
}
