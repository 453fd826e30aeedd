"""The lookups of a VIP reader, over decoded mesh views (pure: no boto3, no I/O).

The same answers as the JavaScript reader's `VipSnapshot` (functions/reader/snapshot.ts):

- `lookup_service(service)`: the VIP most meshes list for it (ties: the smaller text), the meshes
  listing it with that VIP, and every VIP it has (more than one only while a `VIP_CIDR` change
  has not reached every mesh's item);
- `reverse(vip)`: whose a VIP is (any text form of the address);
- `lookup_host(host)`, `reverse_host(vip)`: the same for external services' hosts, which are
  apart from services (a host spelled like a service is not that service).

Names are data: kept in dicts, where `__proto__` and `constructor` are ordinary keys.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

_IPV4 = re.compile(r"^(0|[1-9]\d{0,2})(\.(0|[1-9]\d{0,2})){3}$")
_IPV6_CHARS = re.compile(r"^[0-9A-Fa-f:.]+$")


def canonical_vip(text: Any) -> Optional[str]:
    """A plain IPv4 (dotted decimal, no leading zeros) or IPv6 address in canonical text, else None."""
    if not isinstance(text, str):
        return None
    if _IPV4.match(text) is None and (_IPV6_CHARS.match(text) is None or ":" not in text):
        return None
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def _order(entries: Iterable[Tuple[str, List[str]]]) -> List[Tuple[str, List[str]]]:
    """Most meshes first, ties by the smaller text (code-point order, as JavaScript's for ASCII)."""
    return sorted(entries, key=lambda entry: (-len(entry[1]), entry[0]))


def _holders(
    views: Mapping[str, Any], entries_of: str
) -> Dict[str, Dict[str, List[str]]]:
    """name -> VIP -> meshes (sorted), over every view's `entries_of` map."""
    holders: Dict[str, Dict[str, List[str]]] = {}
    for mesh in sorted(views):
        for name, vip in getattr(views[mesh], entries_of).items():
            holders.setdefault(name, {}).setdefault(vip, []).append(mesh)
    return holders


class Snapshot:
    """Mesh views (mesh -> view with `vips` and `hosts` dicts) and their lookups, built once."""

    def __init__(self, views: Mapping[str, Any]) -> None:
        self.views = dict(views)
        self._services: Optional[Dict[str, Dict[str, Any]]] = None
        self._owners: Optional[Dict[str, Dict[str, Any]]] = None
        self._hosts: Optional[Dict[str, Dict[str, Any]]] = None
        self._host_owners: Optional[Dict[str, Dict[str, Any]]] = None

    def all_services(self) -> Dict[str, Dict[str, Any]]:
        if self._services is None:
            self._services = {}
            for service, by_vip in _holders(self.views, "vips").items():
                addresses = [{"vip": vip, "meshes": meshes} for vip, meshes in _order(by_vip.items())]
                first = addresses[0]
                self._services[service] = {
                    "service": service,
                    "vip": first["vip"],
                    "meshes": first["meshes"],
                    "addresses": addresses,
                }
        return self._services

    def all_vips(self) -> Dict[str, Dict[str, Any]]:
        if self._owners is None:
            by_vip: Dict[str, Dict[str, List[str]]] = {}
            for mesh in sorted(self.views):
                for service, vip in self.views[mesh].vips.items():
                    by_vip.setdefault(vip, {}).setdefault(service, []).append(mesh)
            self._owners = {}
            for vip, services in by_vip.items():
                names = sorted(services)
                self._owners[vip] = {
                    "vip": vip,
                    "service": names[0],
                    "meshes": services[names[0]],
                    "services": names,
                }
        return self._owners

    def all_hosts(self) -> Dict[str, Dict[str, Any]]:
        if self._hosts is None:
            self._hosts = {}
            for host, by_vip in _holders(self.views, "hosts").items():
                vip, meshes = _order(by_vip.items())[0]
                self._hosts[host] = {"host": host, "vip": vip, "meshes": meshes}
        return self._hosts

    def lookup_service(self, service: str) -> Optional[Dict[str, Any]]:
        return self.all_services().get(service)

    def reverse(self, vip: str) -> Optional[Dict[str, Any]]:
        canonical = canonical_vip(vip)
        return None if canonical is None else self.all_vips().get(canonical)

    def lookup_host(self, host: str) -> Optional[Dict[str, Any]]:
        return self.all_hosts().get(host.lower())

    def reverse_host(self, vip: str) -> Optional[Dict[str, Any]]:
        canonical = canonical_vip(vip)
        if canonical is None:
            return None
        if self._host_owners is None:
            self._host_owners = {}
            # Hosts by name: a VIP listed for two hosts (never, by the contract) names the first.
            for host in sorted(self.all_hosts()):
                lookup = self.all_hosts()[host]
                self._host_owners.setdefault(lookup["vip"], lookup)
        return self._host_owners.get(canonical)

    def answers(self) -> Dict[str, Any]:
        """Every lookup's answer, as sorted [key, answer] pairs (what the tests compare)."""
        host_vips = sorted({lookup["vip"] for lookup in self.all_hosts().values()})
        return {
            "services": sorted([name, answer] for name, answer in self.all_services().items()),
            "vips": sorted([vip, answer] for vip, answer in self.all_vips().items()),
            "hosts": sorted([host, answer] for host, answer in self.all_hosts().items()),
            "hostVips": [[vip, self.reverse_host(vip)] for vip in host_vips],
        }
