"""Policy: which tool calls need a person, and who may decide, read from tools.toml.

The project's ``.signoff/tools.toml`` (in the working directory or its nearest parent
that has one) is consulted before the global ``$XDG_CONFIG_HOME/signoff/tools.toml``::

    [tools]
    need_approval = ["shell", "write_file", "fs.*"]  # globs on the tool name -> "ask"
    default = "allow"          # optional: verdict for tools nothing in this file matches

    [governance]               # optional: who may decide
    approvers = ["alice"]      # designated approvers; empty = any approver or admin
    quorum = 1                 # approvals needed
    allow_self_approval = false
    starter_may_approve = true # a hosted run's starter may approve its calls; false (or
                               # approvers without them, or quorum > 1): they count as
                               # the requester

    [[rules]]                  # in order; the first match wins
    tool = "shell"             # glob on the tool name
    args = { command = "rm *" }  # optional: each key present and its value matching the glob
    action = "deny"            # allow | deny | ask
    name = "no-rm"             # optional label for explanations
    approvers = ["carol"]      # optional governance for what this rule sends to "ask"
    quorum = 2
    allow_self_approval = true
    expires_in = 600           # for what it sends to "ask": expiry, over the [expiry] table
    on_expire = "reject"       # reject | approve
    allowed_decisions = ["approve", "reject"]  # what a person may decide (only policy
                                               # may take reject away)

    [[rules]]
    tool = "deploy"
    args = { env = "staging" }
    action = "allow"
    extra_args = "ignore"      # allow rules only: also match calls with arguments args lacks

    [[notify]]                 # notification routes (read-only here; see signoff notify)
    name = "deploys"
    tool = "deploy*"           # globs: tool, agent, session; kind = approval|choice|questions
    channel = { type = "slack", channel = "#deploys", mention = ["U0123ABCD"] }
    escalate_after = 900       # seconds undecided, then once to escalate_to
    escalate_to = "oncall"
    warn_before_expiry = 300   # seconds before expiry: warn the route once
    digest = 600               # optional: one message per window instead of one each

    [expiry]                   # optional: for every request this file governs
    expires_in = 3600          # seconds; a requester may ask for less (which then rejects)
    on_expire = "reject"       # reject | approve | default (the requester's default answer)

Argument globs match as ``signoff.domain.patterns`` says: strictly for ``allow`` rules
(``*`` stops at ``/``, paths normalized, no unnamed arguments, no shell chaining the
pattern lacks), permissively for ``deny`` and ``ask`` rules, so neither is ever weakened.

Evaluation: rules of every file in order (project first); then ``need_approval`` globs;
then the first ``default``; then, if any file lists ``need_approval``, the rest are
``allow``; with no files, or none saying anything, every call is ``ask`` (fail closed).
Unknown keys are errors: a typo must never silently weaken a policy.
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from signoff.domain.notify import Route, RouteSpec
from signoff.domain.patterns import ExtraArgs, args_mismatch
from signoff.domain.requests import OnExpire, RequestKind
from signoff.domain.submission import MAX_EXPIRES_IN
from signoff.domain.terms import Terms
from signoff.errors import PolicyError

__all__ = [
    "Governance",
    "Policy",
    "PolicyDecision",
    "PolicyFile",
    "Rule",
    "Verdict",
    "global_policy_path",
    "project_policy_path",
]

Verdict: TypeAlias = Literal["allow", "deny", "ask"]

_LOADED = datetime(1970, 1, 1, tzinfo=UTC)
"""A tools.toml route's ``created_at``: it is not stored, so it has no moment of adding."""

BUILT_IN = "built-in default"


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class Governance(_Strict):
    """Who may decide a request."""

    approvers: tuple[str, ...] = ()
    """Designated approvers (principal names); empty means any approver or admin."""
    quorum: int = Field(default=1, ge=1, le=20)
    """How many approvals it takes."""
    allow_self_approval: bool = False
    """Whether the requester may approve their own request."""
    starter_may_approve: bool = True
    """Whether the person who started a hosted run may approve the calls it files (unless
    designated approvers leave them out or a quorum is set: then they count as the
    requester)."""


class _GovernanceTable(_Strict):
    approvers: list[str] | None = None
    quorum: int | None = Field(default=None, ge=1, le=20)
    allow_self_approval: bool | None = None
    starter_may_approve: bool | None = None

    def over(self, base: Governance) -> Governance:
        return Governance(
            approvers=tuple(self.approvers) if self.approvers is not None else base.approvers,
            quorum=self.quorum if self.quorum is not None else base.quorum,
            allow_self_approval=(
                self.allow_self_approval
                if self.allow_self_approval is not None
                else base.allow_self_approval
            ),
            starter_may_approve=(
                self.starter_may_approve
                if self.starter_may_approve is not None
                else base.starter_may_approve
            ),
        )


class Rule(_GovernanceTable):
    """One ``[[rules]]`` entry: a tool glob, optional argument globs, and a verdict."""

    tool: str
    """Glob on the tool name."""
    args: dict[str, str] | None = None
    """Argument globs; every key must be present and match."""
    action: Verdict
    """What a matching call gets."""
    name: str | None = None
    """A label for explanations."""
    extra_args: ExtraArgs | None = None
    """allow rules: ``ignore`` also matches calls with arguments ``args`` does not name."""
    expires_in: float | None = Field(default=None, gt=0, le=MAX_EXPIRES_IN)
    """Seconds what this rule asks about waits for a person (over ``[expiry]``)."""
    on_expire: Literal["reject", "approve"] | None = None
    """What expiry does to what this rule asks about (over ``[expiry]``)."""
    allowed_decisions: list[Literal["approve", "reject", "respond"]] | None = Field(
        default=None, min_length=1
    )
    """The decisions a person has on what this rule asks about (default: all)."""

    @model_validator(mode="after")
    def _extra_args_for_allow(self) -> Rule:
        if self.extra_args is not None and self.action != "allow":
            raise ValueError(
                "extra_args is for allow rules (deny and ask rules always ignore extra arguments)"
            )
        return self

    def matches(self, tool_name: str, args: Mapping[str, object]) -> bool:
        """Whether a call of ``tool_name`` with ``args`` falls under this rule."""
        return self.mismatch(tool_name, args) is None

    def mismatch(self, tool_name: str, args: Mapping[str, object]) -> str | None:
        """Why a call of ``tool_name`` with ``args`` does not fall under this rule; None if it
        does. allow rules match strictly, deny and ask rules permissively."""
        if not fnmatch.fnmatchcase(tool_name, self.tool):
            return f"the tool is not {self.tool!r}"
        if self.args is None:
            return None
        return args_mismatch(
            self.args,
            args,
            strict=self.action == "allow",
            extra_args=self.extra_args or "forbid",
        )


class _ToolsTable(_Strict):
    need_approval: list[str] = []
    default: Verdict | None = None


class _ExpiryTable(_Strict):
    expires_in: float | None = Field(default=None, gt=0, le=MAX_EXPIRES_IN)
    on_expire: OnExpire | None = None


class _FileBody(_Strict):
    tools: _ToolsTable = _ToolsTable()
    governance: _GovernanceTable | None = None
    expiry: _ExpiryTable | None = None
    rules: list[Rule] = []
    notify: list[RouteSpec] = []

    @model_validator(mode="after")
    def _on_expire_needs_expiry(self) -> _FileBody:
        table = self.expiry or _ExpiryTable()
        if (table.on_expire or "reject") != "reject" and table.expires_in is None:
            raise ValueError("expiry.on_expire other than reject needs expiry.expires_in")
        for n, rule in enumerate(self.rules):
            if (rule.on_expire or "reject") != "reject" and (
                rule.expires_in is None and table.expires_in is None
            ):
                raise ValueError(
                    f"rules[{n}].on_expire other than reject needs expires_in "
                    "(in the rule or in [expiry])"
                )
        return self


class PolicyFile(BaseModel):
    """One parsed tools.toml and where it came from."""

    model_config = ConfigDict(frozen=True)

    source: str
    """The file's path (or ``<string>``)."""
    need_approval: tuple[str, ...] = ()
    """Globs of tools that need approval."""
    default: Verdict | None = None
    """Verdict for tools this file matches nowhere else."""
    governance: _GovernanceTable | None = None
    """The file's ``[governance]`` table, if any."""
    expiry: _ExpiryTable | None = None
    """The file's ``[expiry]`` table, if any."""
    rules: tuple[Rule, ...] = ()
    """The rules, in order."""
    notify: tuple[RouteSpec, ...] = ()
    """The file's ``[[notify]]`` routes, in order."""

    @classmethod
    def parse(cls, text: str, source: str = "<string>") -> PolicyFile:
        """Parse tools.toml text; PolicyError names the source and the problem."""
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise PolicyError(f"{source}: not valid TOML: {exc}") from None
        try:
            body = _FileBody.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = _toml_location(err["loc"])
            msg = str(err["msg"])
            if err["type"] == "extra_forbidden":
                msg = "unknown key (a typo would silently weaken the policy)"
            elif err["type"] == "literal_error" and err["loc"][-1] in ("action", "default"):
                msg = "must be one of allow, deny, ask"
            raise PolicyError(f"{source}: {where}: {msg}") from None
        return cls(
            source=source,
            need_approval=tuple(body.tools.need_approval),
            default=body.tools.default,
            governance=body.governance,
            expiry=body.expiry,
            rules=tuple(body.rules),
            notify=tuple(body.notify),
        )

    @classmethod
    def read(cls, path: Path) -> PolicyFile:
        """Read and parse a tools.toml file."""
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise PolicyError(f"{path}: cannot be read: {exc}") from None
        return cls.parse(text, str(path))


def _toml_location(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "file"


class PolicyDecision(BaseModel):
    """The verdict on one call, which file and rule gave it, and who may decide."""

    model_config = ConfigDict(frozen=True)

    verdict: Verdict
    """allow, deny or ask."""
    source: str
    """The file that decided, or ``built-in default``."""
    rule: str
    """What in that file decided, e.g. ``rules[2] "no-rm"`` or ``need_approval "shell"``."""
    governance: Governance = Governance()
    """Who may decide, when the verdict is ask."""
    terms: Terms | None = None
    """Expiry and a person's choices, when the verdict is ask (None: ``Policy.terms``)."""

    def explain(self) -> str:
        """One line: verdict, rule and file."""
        where = "" if self.source == BUILT_IN else f" in {self.source}"
        return f"{self.verdict}: {self.rule}{where}"


def global_policy_path() -> Path:
    """``$XDG_CONFIG_HOME/signoff/tools.toml`` (``~/.config`` when unset)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "signoff" / "tools.toml"


def project_policy_path(start: Path) -> Path | None:
    """The nearest ``.signoff/tools.toml`` in ``start`` or a parent, if any."""
    here = start.resolve()
    for directory in (here, *here.parents):
        candidate = directory / ".signoff" / "tools.toml"
        if candidate.is_file():
            return candidate
    return None


class Policy:
    """The files in precedence order, and the verdict they give a call."""

    def __init__(self, files: Sequence[PolicyFile] = ()) -> None:
        self.files: tuple[PolicyFile, ...] = tuple(files)

    @classmethod
    def load(cls, project_dir: Path | None = None, *, global_path: Path | None = None) -> Policy:
        """The project's tools.toml (nearest to ``project_dir``, default cwd) over the global."""
        paths = [project_policy_path(project_dir or Path.cwd())]
        glob_path = global_path if global_path is not None else global_policy_path()
        paths.append(glob_path if glob_path.is_file() else None)
        seen: set[Path] = set()
        files = []
        for path in paths:
            if path is not None and path.resolve() not in seen:
                seen.add(path.resolve())
                files.append(PolicyFile.read(path))
        return cls(files)

    @classmethod
    def from_toml(cls, text: str, *, source: str = "<string>") -> Policy:
        """A policy of one file given as text."""
        return cls([PolicyFile.parse(text, source)])

    def routes(self) -> tuple[Route, ...]:
        """The files' ``[[notify]]`` routes (read-only, source ``tools.toml``); a name two
        files give is the first file's."""
        seen: set[str] = set()
        routes = []
        for file in self.files:
            for spec in file.notify:
                if spec.name not in seen:
                    seen.add(spec.name)
                    routes.append(
                        Route(
                            **spec.model_dump(),
                            id=f"route_toml_{spec.name}",
                            created_by="tools.toml",
                            created_at=_LOADED,
                            source="tools.toml",
                        )
                    )
        return tuple(routes)

    def governance(self) -> Governance:
        """Who may decide requests no rule speaks of (choice and questions requests)."""
        return self._governance(None)

    def _governance(self, rule: Rule | None) -> Governance:
        base = Governance()
        table = next((f.governance for f in self.files if f.governance is not None), None)
        if table is not None:
            base = table.over(base)
        return rule.over(base) if rule is not None else base

    def terms(self, kind: RequestKind = "approval") -> Terms:
        """Expiry and a person's choices for requests no rule speaks of: the first file's
        ``[expiry]`` table, else the built-in terms (no expiry; expiry would reject).

        ``kind`` is for callers that speak of one kind; the table's ``on_expire`` applies to
        the kinds it fits, and ``settle`` makes it ``reject`` for the others.
        """
        del kind  # one table for every kind: settle() fits on_expire to the kind
        return self._terms(None, "")

    def _terms(self, rule: Rule | None, label: str) -> Terms:
        found = next(((f.expiry, f.source) for f in self.files if f.expiry is not None), None)
        base = Terms()
        if found is not None:
            table, source = found
            base = Terms(
                expires_in=table.expires_in,
                on_expire=table.on_expire or "reject",
                set_by=f"[expiry] in {source}",
            )
        if rule is None:
            return base
        update: dict[str, object] = {}
        if rule.expires_in is not None or rule.on_expire is not None:
            update["set_by"] = label
            if rule.expires_in is not None:
                update["expires_in"] = rule.expires_in
            if rule.on_expire is not None:
                update["on_expire"] = rule.on_expire
        if rule.allowed_decisions is not None:
            update["allowed_decisions"] = tuple(rule.allowed_decisions)
        return base.model_copy(update=update)

    def explain_rules(self, tool_name: str, args: Mapping[str, object]) -> list[str]:
        """One line per rule naming ``tool_name``, in order: whether it matches, and why not."""
        lines = []
        for f in self.files:
            for n, rule in enumerate(f.rules):
                if not fnmatch.fnmatchcase(tool_name, rule.tool):
                    continue
                how = "strict" if rule.action == "allow" else "permissive"
                label = f"rules[{n}]" + (f' "{rule.name}"' if rule.name else "")
                why = rule.mismatch(tool_name, args)
                outcome = "matches" if why is None else f"does not match: {why}"
                lines.append(f"{label} ({rule.action}, {how}) in {f.source}: {outcome}")
        return lines

    def evaluate(self, tool_name: str, args: Mapping[str, object]) -> PolicyDecision:
        """The verdict on calling ``tool_name`` with ``args``."""
        explicit = self.explicit(tool_name, args)
        return explicit if explicit is not None else self.fallback()

    def explicit(self, tool_name: str, args: Mapping[str, object]) -> PolicyDecision | None:
        """The verdict of a rule or ``need_approval`` glob naming this call; None if none does."""
        for f in self.files:
            for n, rule in enumerate(f.rules):
                if rule.matches(tool_name, args):
                    label = f"rules[{n}]" + (f' "{rule.name}"' if rule.name else "")
                    return PolicyDecision(
                        verdict=rule.action,
                        source=f.source,
                        rule=label,
                        governance=self._governance(rule),
                        terms=self._terms(rule, f"{label} in {f.source}"),
                    )
        for f in self.files:
            for glob in f.need_approval:
                if fnmatch.fnmatchcase(tool_name, glob):
                    return PolicyDecision(
                        verdict="ask",
                        source=f.source,
                        rule=f'need_approval "{glob}"',
                        governance=self._governance(None),
                    )
        return None

    def fallback(self) -> PolicyDecision:
        """The verdict on a call no rule or glob names: a ``default``, else allow or ask."""
        for f in self.files:
            if f.default is not None:
                return PolicyDecision(
                    verdict=f.default,
                    source=f.source,
                    rule="default",
                    governance=self._governance(None),
                )
        listing = next((f for f in self.files if f.need_approval), None)
        if listing is not None:
            return PolicyDecision(
                verdict="allow",
                source=listing.source,
                rule="not in need_approval",
                governance=self._governance(None),
            )
        return PolicyDecision(
            verdict="ask",
            source=BUILT_IN,
            rule="no tools.toml says otherwise (fail closed)",
            governance=self._governance(None),
        )
