"""Network partitions between real processes: each broker and the ZooKeeper server in a Linux network
namespace of its own, and per-link faults that drop packets silently, as a real partition does
(issue 24's network nemesis; the faults themselves are in kctl.testing.nemesis_network).

    with NetworkLab.create() as lab:            # NetworkUnavailableError (with the reason) when not root
        zk_node = lab.add_node("zk")
        zookeeper = ZooKeeperServer(dir, host=zk_node.ip, command_prefix=zk_node.prefix).start()
        cluster = LocalCluster(dir, 3, zookeeper=zookeeper)
        nodes = lab.attach(cluster)             # broker id -> Node: each broker listens in its namespace
        cluster.start()
        lab.cut(nodes[1], zk_node)              # broker 1 and ZooKeeper no longer reach each other
        lab.heal()

**Topology.** A lab owns the subnet 10.77.N.0/24 (N is the first free one: several labs can run at
once, e.g. one per pytest worker) and a router: the namespace ``kctlN-lab``, which also claims the
subnet. Each node is a namespace ``kctlN-<name>`` with one veth pair to the router: its end
(``eth0``) holds the node's /32 address, the router's end the router's address 10.77.N.253. The
test's process stays in the root namespace, which reaches the router through one more veth pair and
holds the clients' address 10.77.N.254 (`client_ip`): everything between two nodes, and between a
node and the root namespace, passes through the router and is forwarded there. Processes start
inside a node with ``ip netns exec`` (which execs them: their pid is the process's own).

**Faults** are policy-routing rules in the router, ``ip rule add from A to B blackhole``: forwarded
packets that match are dropped without a word (no reset, no ICMP), so connections see silence and
time out, as in a real partition; new connections time out too. A rule is one direction; `cut` adds
both, `cut_one_way` one (an asymmetric partition). The root namespace is an endpoint like any node
(`client_ip`): `isolate` cuts a node from it too, both ways and silently, so an isolated broker
reaches neither its clients nor anything else listening there (ZooKeeper proxies). The rules live in
the router and not in the root namespace because a namespace delivers packets for its own addresses
by its local table, which comes before every rule: a node cut by rules in the root namespace would
still reach a socket of the root namespace, one way. `heal` removes every rule this lab added.

**Not here:** latency and loss (``tc netem``) and ``tc`` drop actions need kernel modules
(sch_netem, act_gact) that some kernels, this project's CI VM among them, do not have;
`latency_unavailable()` says why, and a caller skips with that reason. Policy routing needs no module.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kctl.localcluster import LocalCluster

SUBNET_PREFIX = "10.77"
CLIENT_HOST = 254  # the root namespace's address in each lab's subnet
ROUTER_HOST = 253  # the router's address (on each of its veths)
RULE_PRIORITY = 1000  # before the router's main table (32766)
MAX_LABS = 200


class NetworkUnavailableError(RuntimeError):
    """Network namespaces cannot be made here (not root, no ``ip``, no namespace support): the
    message says which, for a test's skip reason."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip() or result.returncode}")
    return result


def unavailable() -> str | None:
    """Why network namespaces cannot be used here, None when they can."""
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    probe = f"kctl-probe-{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def latency_unavailable() -> str | None:
    """Why latency/loss cannot be injected here (``tc netem``), None when it can."""
    if shutil.which("tc") is None:
        return "the `tc` command (iproute2) is not installed"
    probe = f"kctl-netem-{os.getpid()}"
    _ip("netns", "add", probe)
    try:
        netem = ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"]
        result = subprocess.run(["ip", "netns", "exec", probe, *netem], capture_output=True, text=True)
    finally:
        _ip("netns", "del", probe, check=False)
    if result.returncode != 0:
        return f"this kernel has no netem qdisc (sch_netem): {result.stderr.strip()}"
    return None


@dataclasses.dataclass(frozen=True)
class Node:
    """One namespace of a lab: ``name``, namespace ``namespace``, address ``ip``."""

    name: str
    namespace: str
    ip: str
    router_veth: str  # its veth's other end, in the lab's router

    @property
    def prefix(self) -> list[str]:
        """What to put before a command line to run it in this node."""
        return ["ip", "netns", "exec", self.namespace]


Endpoint = Node | str  # a node, or an address (the clients': `NetworkLab.client_ip`)


class NetworkLab:
    """A subnet of namespaces, its router and the faults between them (see the module docstring)."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.subnet = f"{SUBNET_PREFIX}.{index}"
        self.client_ip = f"{self.subnet}.{CLIENT_HOST}"
        self.router_ip = f"{self.subnet}.{ROUTER_HOST}"
        self.nodes: dict[str, Node] = {}
        self._router = f"kctl{index}-lab"
        self._client_veth = f"k{index}c"
        self._rules: list[tuple[str, str]] = []

    @classmethod
    def create(cls) -> NetworkLab:
        """A lab on the first free subnet; `NetworkUnavailableError` when namespaces cannot be made."""
        reason = unavailable()
        if reason is not None:
            raise NetworkUnavailableError(reason)
        for index in range(1, MAX_LABS + 1):
            # the router namespace claims the subnet: `ip netns add` fails when another lab has it
            if _ip("netns", "add", f"kctl{index}-lab", check=False).returncode == 0:
                lab = cls(index)
                try:
                    lab._connect_the_root_namespace()
                except BaseException:
                    lab.close()
                    raise
                return lab
        raise NetworkUnavailableError(f"no free lab subnet among {SUBNET_PREFIX}.1-{MAX_LABS}.0/24")

    def _router_ip(self, *args: str) -> None:
        _ip("-n", self._router, *args)

    def _connect_the_root_namespace(self) -> None:
        """Forwarding on in the router, and the veth pair between it and the root namespace."""
        forward = ["sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"]
        subprocess.run(["ip", "netns", "exec", self._router, *forward], check=True, capture_output=True)
        self._router_ip("link", "set", "lo", "up")
        inside = f"k{self.index}r"
        _ip("link", "del", self._client_veth, check=False)  # left by a lab whose process was killed
        _ip("link", "add", self._client_veth, "type", "veth", "peer", "name", inside)
        _ip("link", "set", inside, "netns", self._router)
        self._router_ip("addr", "add", f"{self.router_ip}/32", "dev", inside)
        self._router_ip("link", "set", inside, "up")
        self._router_ip("route", "add", f"{self.client_ip}/32", "dev", inside)
        _ip("addr", "add", f"{self.client_ip}/32", "dev", self._client_veth)
        _ip("link", "set", self._client_veth, "up")
        _ip("route", "add", f"{self.router_ip}/32", "dev", self._client_veth)
        _ip("route", "add", f"{self.subnet}.0/24", "via", self.router_ip, "dev", self._client_veth)

    def __enter__(self) -> NetworkLab:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<NetworkLab {self.subnet}.0/24 nodes={sorted(self.nodes)}>"

    def add_node(self, name: str) -> Node:
        """A new namespace with an address of its own, reachable (through the router) from the root
        namespace and every other node of the lab."""
        host_number = len(self.nodes) + 1
        if host_number >= ROUTER_HOST:
            raise ValueError(f"a lab holds at most {ROUTER_HOST - 1} nodes")
        node = Node(
            name=name,
            namespace=f"kctl{self.index}-{name}",
            ip=f"{self.subnet}.{host_number}",
            router_veth=f"k{self.index}v{host_number}",
        )
        inside = f"k{self.index}p{host_number}"
        _ip("netns", "add", node.namespace)
        self.nodes[name] = node
        _ip("link", "add", node.router_veth, "type", "veth", "peer", "name", inside)
        _ip("link", "set", node.router_veth, "netns", self._router)
        _ip("link", "set", inside, "netns", node.namespace)
        _ip("-n", node.namespace, "link", "set", inside, "name", "eth0")
        _ip("-n", node.namespace, "addr", "add", f"{node.ip}/32", "dev", "eth0")
        _ip("-n", node.namespace, "link", "set", "eth0", "up")
        _ip("-n", node.namespace, "link", "set", "lo", "up")
        self._router_ip("addr", "add", f"{self.router_ip}/32", "dev", node.router_veth)
        self._router_ip("link", "set", node.router_veth, "up")
        self._router_ip("route", "add", f"{node.ip}/32", "dev", node.router_veth)
        _ip("-n", node.namespace, "route", "add", f"{self.router_ip}/32", "dev", "eth0")
        _ip("-n", node.namespace, "route", "add", "default", "via", self.router_ip, "dev", "eth0")
        return node

    def attach(self, cluster: LocalCluster) -> dict[int, Node]:
        """Put each broker of ``cluster`` (not started yet) in a node of its own: it listens on the
        node's address and runs in its namespace. Returns broker id -> node."""
        nodes = {}
        for broker_id, broker in cluster.brokers.items():
            node = nodes[broker_id] = self.add_node(f"b{broker_id}")
            broker.host = node.ip
            broker.command_prefix = node.prefix
        return nodes

    # -- faults ----------------------------------------------------------------------------------
    @staticmethod
    def _address(endpoint: Endpoint) -> str:
        return endpoint.ip if isinstance(endpoint, Node) else endpoint

    def cut_one_way(self, source: Endpoint, destination: Endpoint) -> None:
        """Drop every packet from ``source`` to ``destination`` (not the other way)."""
        rule = (self._address(source), self._address(destination))
        if rule in self._rules:
            return
        self._router_ip(
            "rule", "add", "priority", str(RULE_PRIORITY), "from", rule[0], "to", rule[1], "blackhole"
        )
        self._rules.append(rule)

    def cut(self, a: Endpoint, b: Endpoint) -> None:
        """``a`` and ``b`` no longer reach each other (both directions)."""
        self.cut_one_way(a, b)
        self.cut_one_way(b, a)

    def isolate(self, node: Node, *, from_clients: bool = True) -> None:
        """``node`` reaches no other node (nor the clients, unless ``from_clients`` is false)."""
        for other in self.nodes.values():
            if other is not node:
                self.cut(node, other)
        if from_clients:
            self.cut(node, self.client_ip)

    def partition(self, groups: Iterable[Iterable[Endpoint]]) -> None:
        """Cut every pair of endpoints that share no group: ``[[a, b], [b, c]]`` is a bridge (``a``
        and ``c`` are cut, ``b`` reaches both)."""
        sets = [{self._address(e) for e in group} for group in groups]
        everyone = sorted(set().union(*sets))
        for i, a in enumerate(everyone):
            for b in everyone[i + 1 :]:
                if not any(a in group and b in group for group in sets):
                    self.cut(a, b)

    @property
    def cuts(self) -> list[tuple[str, str]]:
        """The links cut now, as (from, to) addresses."""
        return list(self._rules)

    def heal(self) -> None:
        """Remove every rule this lab added: every node reaches every other again."""
        while self._rules:
            source, destination = self._rules.pop()
            _ip(
                "-n", self._router, "rule", "del", "priority", str(RULE_PRIORITY),
                "from", source, "to", destination, "blackhole",
                check=False,
            )  # fmt: skip

    def close(self) -> None:
        """Heal, then delete every namespace of the lab, the router's last (and with them every
        veth). Processes still running in a namespace keep it alive without its name: stop them
        first."""
        self.heal()
        for node in self.nodes.values():
            _ip("netns", "del", node.namespace, check=False)
        self.nodes.clear()
        _ip("netns", "del", self._router, check=False)
        _ip("link", "del", self._client_veth, check=False)  # gone with its peer, unless it lingers


@contextlib.contextmanager
def network_lab() -> Iterator[NetworkLab]:
    """`NetworkLab.create()` as a context manager."""
    lab = NetworkLab.create()
    try:
        yield lab
    finally:
        lab.close()
