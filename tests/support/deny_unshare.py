"""Runs a command under a seccomp filter that refuses unshare(2) with EPERM,
as a container runtime's default profile does for a process without
CAP_SYS_ADMIN: `python3 deny_unshare.py CMD ARGS...`.

The filter is installed with PR_SET_NO_NEW_PRIVS (so no privilege is needed)
and inherited by CMD and everything it starts. Exits 3 on an architecture it
does not know (the test then says so instead of passing)."""

import ctypes
import os
import platform
import struct
import sys

# (audit arch, unshare's syscall number) per machine.
ARCHES = {
    "x86_64": (0xC000003E, 272),
    "aarch64": (0xC00000B7, 97),
}

BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_RET_K = 0x06
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
EPERM = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


def insn(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)


def main():
    arch = ARCHES.get(platform.machine())
    if arch is None:
        print(f"deny_unshare: unknown machine {platform.machine()}", file=sys.stderr)
        sys.exit(3)
    audit_arch, nr_unshare = arch
    prog = b"".join(
        [
            insn(BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
            insn(BPF_JEQ_K, 1, 0, audit_arch),
            insn(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
            insn(BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
            insn(BPF_JEQ_K, 0, 1, nr_unshare),
            insn(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM),
            insn(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
        ]
    )
    n = len(prog) // 8
    buf = ctypes.create_string_buffer(prog)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(n, ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        sys.exit(f"deny_unshare: no_new_privs: {os.strerror(ctypes.get_errno())}")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        sys.exit(f"deny_unshare: seccomp: {os.strerror(ctypes.get_errno())}")
    os.execvp(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
