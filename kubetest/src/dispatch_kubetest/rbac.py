"""Bearer-token identities and RBAC-like rule tables.

A request's identity is its bearer token (``Authorization: Bearer <token>``, scheme matched
case-insensitively). Tokens with a rule table are authorised by it: a request is allowed when
one rule matches its verb, API group, resource (``pods``, or ``pods/log`` for a subresource) and
namespace. Tokens without a table are governed by ``default_allow`` (True: the whole cluster, like
a cluster-admin kubeconfig). ``require_token`` makes an unknown token a 401. A request without
credentials is a 401, as on a cluster whose API server runs with ``--anonymous-auth=false``, unless
``allow_anonymous`` is set (then it is ``system:anonymous``, governed like an unknown token). A revoked
token (``revoke``: a rotated service-account token, a deleted secret) is a 401 on every request that starts
after the revocation; a watch already open goes on until it ends, as on a real API server, which
authenticates a request once, when it starts.
Not modelled: roles/bindings objects, groups, impersonation, resourceNames on list/watch, aggregation.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

ANY = "*"


@dataclass(frozen=True)
class Rule:
    """Allows ``verbs`` on ``resources`` (``"pods"``, ``"pods/log"``, ``"*"``) in ``groups``.

    ``namespaces`` empty means every namespace and the cluster scope; ``resource_names`` empty
    means every object.
    """

    verbs: tuple[str, ...]
    groups: tuple[str, ...]
    resources: tuple[str, ...]
    namespaces: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()

    def allows(self, verb: str, group: str, resource: str, subresource: str, namespace: str, name: str) -> bool:
        full = f"{resource}/{subresource}" if subresource else resource
        return (
            (ANY in self.verbs or verb in self.verbs)
            and (ANY in self.groups or group in self.groups)
            and (
                ANY in self.resources
                or full in self.resources
                or (bool(subresource) and f"{resource}/*" in self.resources)
            )
            and (not self.namespaces or namespace in self.namespaces)
            and (not self.resource_names or name in self.resource_names)
        )


def rule(
    verbs: str | list[str],
    groups: str | list[str],
    resources: str | list[str],
    namespaces: list[str] | None = None,
    names: list[str] | None = None,
) -> Rule:
    """Convenience constructor: ``rule("get,list,watch", "", "pods,pods/log", ["ml"])``."""

    def split(v: str | list[str]) -> tuple[str, ...]:
        return tuple(x.strip() for x in v.split(",")) if isinstance(v, str) else tuple(v)

    return Rule(
        split(verbs),
        split(groups) if groups != "" else ("",),
        split(resources),
        tuple(namespaces or ()),
        tuple(names or ()),
    )


@dataclass(frozen=True)
class Identity:
    token: str | None
    user: str


class Authorizer:
    """Token → user and rule table; answers both enforcement and SelfSubjectAccessReview."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tables: dict[str, list[Rule]] = {}
        self._users: dict[str, str] = {}
        self._revoked: set[str] = set()
        self.default_allow = True
        self.require_token = False
        self.allow_anonymous = False

    def set_rules(self, token: str, rules: list[Rule], user: str | None = None) -> None:
        with self._lock:
            self._tables[token] = list(rules)
            if user:
                self._users[token] = user

    def add_token(self, token: str, user: str) -> None:
        with self._lock:
            self._users[token] = user

    def revoke(self, token: str) -> None:
        """Refuse ``token`` from now on (401), whatever its table."""
        with self._lock:
            self._revoked.add(token)

    def restore(self, token: str) -> None:
        """Accept a revoked ``token`` again."""
        with self._lock:
            self._revoked.discard(token)

    def clear(self, token: str) -> None:
        with self._lock:
            self._tables.pop(token, None)

    def identify(self, authorization: str | None) -> Identity | None:
        """The caller's identity, or None when the request must be refused with 401."""
        token = None
        if authorization:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() == "bearer" and value.strip():
                token = value.strip()
        with self._lock:
            if token is not None and token in self._revoked:
                return None
            known = token is not None and (token in self._tables or token in self._users)
            if token is None:
                return Identity(None, "system:anonymous") if self.allow_anonymous and not self.require_token else None
            if self.require_token and not known:
                return None
            return Identity(token, self._users.get(token, f"token:{token}"))

    def allowed(
        self,
        ident: Identity,
        verb: str,
        group: str,
        resource: str,
        subresource: str = "",
        namespace: str = "",
        name: str = "",
    ) -> bool:
        with self._lock:
            table = self._tables.get(ident.token) if ident.token is not None else None
            if table is None:
                return self.default_allow
            return any(r.allows(verb, group, resource, subresource, namespace, name) for r in table)
