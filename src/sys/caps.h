/* Capabilities of sandbox processes: the usual container set (Docker's
 * default: CHOWN DAC_OVERRIDE FSETID FOWNER MKNOD NET_RAW SETGID SETUID
 * SETFCAP SETPCAP NET_BIND_SERVICE SYS_CHROOT KILL AUDIT_WRITE). */
#pragma once

/* Drop every other capability from the bounding set, and from the
 * effective, permitted, inheritable and ambient sets; set no_new_privs.
 * Called last before execve of cove-init. -errno. */
int caps_drop_to_sandbox_set(void);
