/* Capabilities of sandbox processes, set with raw prctl and capset: libcap
 * would be a dependency for four syscalls. */
#include "sys/caps.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"

#define CAPS_BIT(cap) (UINT64_C(1) << (cap))

/* Docker's default set; see caps.h. */
static const uint64_t caps_sandbox_set = CAPS_BIT(CAP_CHOWN) | CAPS_BIT(CAP_DAC_OVERRIDE) | CAPS_BIT(CAP_FSETID) |
					 CAPS_BIT(CAP_FOWNER) | CAPS_BIT(CAP_MKNOD) | CAPS_BIT(CAP_NET_RAW) |
					 CAPS_BIT(CAP_SETGID) | CAPS_BIT(CAP_SETUID) | CAPS_BIT(CAP_SETFCAP) |
					 CAPS_BIT(CAP_SETPCAP) | CAPS_BIT(CAP_NET_BIND_SERVICE) |
					 CAPS_BIT(CAP_SYS_CHROOT) | CAPS_BIT(CAP_KILL) | CAPS_BIT(CAP_AUDIT_WRITE);

/* The highest capability the running kernel knows, which may be above the
 * CAP_LAST_CAP this was compiled with: a capability we have never heard of
 * must be dropped too. Without /proc, probe the bounding set instead. */
static int caps_last_cap(void)
{
	_cleanup_close_ int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
	int cap;

	if (fd >= 0) {
		char buf[16];
		ssize_t n = read(fd, buf, sizeof(buf) - 1);

		if (n > 0) {
			buf[n] = '\0';
			cap = atoi(buf);
			if (cap > 0 && cap < 64)
				return cap;
		}
	}
	for (cap = 0; cap < 63; cap++)
		if (prctl(PR_CAPBSET_READ, cap + 1, 0, 0, 0) < 0)
			break;
	return cap;
}

/* The bounding set is what an execve can grant (to root, or through file
 * capabilities), so it is cut first, while CAP_SETPCAP is still effective.
 * Capabilities already gone are skipped, so a caller without CAP_SETPCAP
 * whose bounding set is already small enough does not fail. */
static int caps_drop_bounding(void)
{
	int last = caps_last_cap();

	for (int cap = 0; cap <= last; cap++) {
		if (caps_sandbox_set & CAPS_BIT(cap))
			continue;
		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 0)
			continue;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
			return -errno;
	}
	return 0;
}

/* Permitted and effective become the sandbox set, limited to what we hold
 * (capset cannot raise permitted); inheritable is emptied so nothing passes
 * through execve except by the bounding set's rules. */
static int caps_set_process_sets(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = { 0 };
	uint64_t permitted;

	if (syscall(SYS_capget, &hdr, data) < 0)
		return -errno;
	permitted = ((uint64_t)data[1].permitted << 32 | data[0].permitted) & caps_sandbox_set;
	for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++) {
		data[i].permitted = (uint32_t)(permitted >> (32 * i));
		data[i].effective = data[i].permitted;
		data[i].inheritable = 0;
	}
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -errno;
	return 0;
}

int caps_drop_to_sandbox_set(void)
{
	int r;

	r = caps_drop_bounding();
	if (r < 0)
		return r;
	/* Ambient capabilities survive execve of a binary without file
	 * capabilities. Emptying inheritable below would clear them too;
	 * clearing them here does not depend on that rule. */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return -errno;
	r = caps_set_process_sets();
	if (r < 0)
		return r;
	/* Last: from here no execve (setuid, setgid, file capabilities) can
	 * add privilege, and seccomp filters can be loaded without
	 * CAP_SYS_ADMIN. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	return 0;
}
