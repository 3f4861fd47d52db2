# Sourced by the multi-process test scripts: free_ports N prints N free TCP ports on 127.0.0.1,
# below the kernel's ephemeral range (where outgoing connections take theirs, so no other test's
# connection can take one before a node binds it; see tests/ports.hpp).
free_ports() {
  python3 -c 'import random, socket, sys
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
held, ports = [], []
while len(ports) < int(sys.argv[1]):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", random.randrange(20000, max(low, 21000))))
    except OSError:
        continue
    held.append(s)
    ports.append(s.getsockname()[1])
print(" ".join(map(str, ports)))' "$1"
}
