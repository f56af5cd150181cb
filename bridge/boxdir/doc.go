// Package boxdir keeps the host folders of each sandbox, laid out so that
// nothing a sandbox writes can turn the bridge (root on the host) against
// the host.
//
// Each sandbox has two folders under the bridge's data folder:
//
//   - the bridge folder, <root>/run/<id>: owned by the bridge, mode 0755,
//     mounted read-only into the sandbox at /run/boxwire. It holds what the
//     bridge makes for the sandbox: the LLM and egress proxies' sockets and
//     the egress CA certificate. The sandbox can connect to the sockets and
//     read the certificate, but it can create, replace or link nothing
//     there, so the bridge may use names in it as it likes.
//   - the agent folder, <root>/agent/<id>: a tmpfs of its own (capped in
//     bytes and inodes), owned by the sandbox's user and mounted read-write
//     at /run/boxwire-agent. It holds the one socket the agent makes, the
//     agent's end of the bridge's channel. The sandbox can put anything
//     there, so the bridge never trusts a name in it: it opens the socket
//     without following links, checks that it is a socket, and connects
//     through the open descriptor ([Dirs.DialAgent]); it never writes, lists
//     or changes modes there, and removes the folder by unmounting it. Being
//     a filesystem of its own, it cannot hold a hard link to a host file,
//     and filling it fills only its cap.
//
// Making and removing folders mounts and unmounts a tmpfs, so the bridge
// needs root (CAP_SYS_ADMIN) on the host, as it does for capped workspaces.
// With Config.Private (Kubernetes, where no folder is mounted into a pod)
// the agent folder is a plain folder only the bridge can enter, and no
// root is needed.
// Functions here are safe for concurrent use on different ids.
package boxdir
