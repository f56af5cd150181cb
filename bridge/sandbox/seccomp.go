package sandbox

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// DeniedSyscalls are the system calls SeccompProfile denies on top of the
// engine's default profile, each failing with EPERM whatever capabilities
// the sandbox holds:
//
//   - io_uring_*: a large kernel attack surface that also bypasses
//     syscall-level filtering of the operations it performs;
//   - ptrace, process_vm_readv/writev: reading or steering other
//     processes (the agent) from a command the model runs;
//   - personality: turns off address-space randomisation and similar;
//   - userfaultfd: a common ingredient of kernel exploits;
//   - keyctl, add_key, request_key: the kernel keyring is not namespaced;
//   - bpf, perf_event_open: kernel programs and performance counters;
//   - unshare, setns, mount, umount2, pivot_root: namespaces and mounts
//     (the default already gates these on CAP_SYS_ADMIN, which sandboxes
//     never hold; listing them keeps them denied if capabilities change).
var DeniedSyscalls = []string{
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"ptrace", "process_vm_readv", "process_vm_writev",
	"personality", "userfaultfd",
	"keyctl", "add_key", "request_key",
	"bpf", "perf_event_open",
	"unshare", "setns", "mount", "umount2", "pivot_root",
}

// SeccompProfile returns the JSON text of boxwire's seccomp profile: the
// default profile of github.com/moby/profiles/seccomp with every rule that
// would allow one of DeniedSyscalls removed, and one rule that makes them
// fail with EPERM. Pass it as DockerConfig.SeccompProfile.
func SeccompProfile() (string, error) {
	p := seccomp.DefaultProfile()
	kept := p.Syscalls[:0]
	for _, rule := range p.Syscalls {
		rule.Names = slices.DeleteFunc(rule.Names, func(n string) bool {
			return slices.Contains(DeniedSyscalls, n)
		})
		if len(rule.Names) > 0 { // the default profile names rules only by Names
			kept = append(kept, rule)
		}
	}
	eperm := uint(unix.EPERM)
	p.Syscalls = append(kept, &seccomp.Syscall{
		LinuxSyscall: specs.LinuxSyscall{
			Names:    slices.Clone(DeniedSyscalls),
			Action:   specs.ActErrno,
			ErrnoRet: &eperm,
		},
		Comment: "boxwire: denied on top of the default profile",
	})
	raw, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encode seccomp profile: %w", err)
	}
	return string(raw), nil
}
