"""What of a party's account of a run may leave it, and what it keeps to itself.

A party's report (:func:`marketplace.runtime.party_reports.party_report`) is what it hands to whoever
assembles the run report: the server of ``marketplace serve``, or the step that runs ``marketplace
assemble``. The run report goes to the consumer, so a party's report holds only what the party may
publish, public values and declared releases:

* an **owner** publishes the keys of its result that its protocol lists in
  :attr:`~marketplace.plugins.ProtocolSpec.owner_publishes`, and nothing else: a key the protocol
  does not list is private (its row count, which of its rows it handed over). Its timings stay with
  it too (its compute time grows with its rows), and of its driver's details it publishes only how it
  was connected (:data:`OWNER_DRIVER_KEYS`), and of the error replies it received who sent them and
  their code, not their text (:data:`OWNER_ERROR_KEYS`);
* the **curator** publishes its result as its protocol's
  :attr:`~marketplace.plugins.ProtocolSpec.curator_publishes` gives it (why an owner was excluded,
  without the private figures that decided it), or whole;
* the **consumer** publishes its result whole: the run report is its own. A consumer whose run report
  a server assembles for it (a served session) hands that server less (:func:`consumer_handover`):
  what it computed from its own rows stays with it, and it assembles its own copy of the run report.

An owner's **failure** leaves it in a declared form only (:func:`public_failure`): a failure the
runtime itself words about public things (a run timeout, a lost connection, the curator's verdict, a
refused key) as that category's fixed words, and anything else (an internal error, whose text or
traceback can hold a value, a row or a file path of the owner's) as its kind and the phase it happened
in, never its text.

What a party withholds is its **own** part (:data:`OWN`): its own report file keeps it
(``--own-report``), and a simulation's report, whose runner held every party's data anyway, shows it
as the simulator's view (``party_details.<party>.simulator_view``). A deployment's report never
does, whatever a party's report holds: :func:`published` is applied again where the run report is
assembled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TypeGuard

from marketplace import plugins

OWN = "own"
"""The key of a party's report that holds what the party keeps to itself."""

SIMULATION_DRIVERS = frozenset({"inprocess", "processes"})
"""Drivers whose runner started every party and held every party's data: a simulation. Its report may
show what each party kept to itself, as the simulator's view."""

PARTS = ("result", "timing", "driver", "errors_received", "failure")
"""The parts of a party's account that publication splits."""

RUNTIME_OWNER_KEYS = frozenset({"declined"})
"""Result keys the runtime itself gives an owner, published whatever its protocol: an owner whose
lifetime ledger declined the run (:class:`marketplace.roles.lifetime.DeclinedParty`) reports why (the
decline it sent the curator, which depends on public figures only)."""

OWNER_DRIVER_KEYS = frozenset(
    {
        "endpoint",
        "shared_links",
        "hosted_with",
        "scheduling",
        "lost_peers",
        "dropped_connections",
        "quarantined",
        "replies_dropped",
        "max_batch",
        "arrivals",
    }
)
"""What an owner publishes of its driver's details: how it was connected and what it saw of its links,
never a timing (its waiting and I/O times, as its compute time, follow its rows)."""

CONSUMER_HANDS_OVER = frozenset({"end_status"})
"""What a served consumer hands the server of its result (:func:`consumer_handover`): how its part
ended, which the server needs to know that the results were received. Nothing it computed (its
estimates, its ranking of the owners, its quality figures measured on its own target and test set)."""

OWNER_ERROR_KEYS = ("from", "code")
"""What an owner publishes of an error reply it received: who refused which of its messages, and how;
not the text, which may name figures of its own data (why a point was refused: its bid values)."""


@dataclass(frozen=True)
class FailureForm:
    """A category of failure whose words are public: ``pattern`` recognises it (from the failure's
    start) and ``public`` is what leaves the party, formatted with the pattern's named groups, each of
    which the pattern lets match a public value only (a party's name, a setting's figure). The pattern
    also recognises the public form itself, as itself: a report published twice (by the party, then
    where the run report is assembled) says the same."""

    pattern: re.Pattern[str]
    public: str

    def form(self, failure: str) -> str | None:
        found = self.pattern.match(failure)
        return None if found is None else self.public.format(**found.groupdict())


_PEER = r"(?P<peer>curator|consumer|owner-\d+)"
_FIGURE = r"\d+(?:\.\d+)?(?:e[+-]?\d+)?"
_CURATOR_AT = r"the curator(?: at \S+)?"

UNLISTED_FAILURE = "it failed (why stays in its own report)"
"""What an owner publishes of a failure no category names."""

PUBLIC_FAILURES = (
    FailureForm(re.compile(rf"run timeout: (?P<s>{_FIGURE}) s elapsed$"), "run timeout: {s} s elapsed"),
    FailureForm(
        re.compile(rf"lost contact with {_PEER} \(its connection closed\b"),
        "lost contact with {peer} (its connection closed)",
    ),
    FailureForm(
        re.compile(rf"lost contact with {_PEER} \(never connected\b"),
        "lost contact with {peer} (never connected in time)",
    ),
    FailureForm(
        re.compile(rf"lost contact with {_PEER} \(no \b"), "lost contact with {peer} (no progress within its deadline)"
    ),
    FailureForm(re.compile(rf"lost contact with {_PEER}\b"), "lost contact with {peer}"),
    FailureForm(
        re.compile(r"the curator ended the run as failed for this party\b"),
        "the curator ended the run as failed for this party (the curator's report says why)",
    ),
    FailureForm(re.compile(rf"{_PEER} refused our hello\b"), "{peer} refused our hello"),
    FailureForm(re.compile(r"the curator runs another run\b"), "the curator runs another run"),
    FailureForm(
        re.compile(rf"{_CURATOR_AT} refused this party's CURVE key\b"), "the curator refused this party's CURVE key"
    ),
    FailureForm(
        re.compile(rf"{_CURATOR_AT} uses another security mechanism\b"),
        "the curator uses another security mechanism than this party",
    ),
    FailureForm(re.compile(rf"{_CURATOR_AT} refused the CURVE handshake\b"), "the curator refused the CURVE handshake"),
    FailureForm(re.compile(r"the owner's agent was stopped$"), "the owner's agent was stopped"),
    FailureForm(re.compile(rf"the session ran longer than (?P<s>{_FIGURE}) s$"), "the session ran longer than {s} s"),
    FailureForm(re.compile(re.escape(UNLISTED_FAILURE) + "$"), UNLISTED_FAILURE),
)
"""The failures an owner publishes in words (:func:`public_failure`): those the runtime writes about
public things only, which the other parties need to know what went wrong (its time ran out, a
connection was lost, the curator ended the run for it, a key was refused). A failure that no form names
is private by default."""

INTERNAL_ERROR = "internal error"
"""How a failure raised by a party's own code begins (:func:`internal_failure`)."""

_EXCEPTION_KIND = (
    r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Iteration|Warning|Again|Timeout|Declined)"
)
"""What an exception's type name looks like: anything else in its place is taken for its text."""

_INTERNAL = re.compile(
    rf"{INTERNAL_ERROR}(?: \((?P<kind>{_EXCEPTION_KIND})\))?(?: in its (?P<where>agent|owner host))?"
    r"(?: while (?P<phase>starting|handling a message|keeping time|finishing))?(?:: (?P<rest>.*))?$",
    re.DOTALL,
)


def internal_failure(err: BaseException, *, where: str, phase: str) -> str:
    """The failure of a party whose own code raised ``err`` (``where``: ``agent``; ``phase``:
    ``starting``, ``handling a message``, ``keeping time`` or ``finishing``): the whole text, for the
    party's own report and log; :func:`public_failure` publishes its kind and phase only."""
    return f"{INTERNAL_ERROR} in its {where} while {phase}: {type(err).__name__}: {err}"


def public_failure(failure: str | None) -> str | None:
    """What an owner publishes of its ``failure``: decided by the failure's category, allow-list style.
    A category whose words are public (:data:`PUBLIC_FAILURES`: a timeout, a lost connection, the
    curator's verdict without its reason, a refused key) leaves in that category's fixed words; an
    internal error as its exception's kind and the phase it happened in (``internal error (ValueError)
    in its agent while handling a message``), never its text or traceback, which can hold a value, a
    row or a file path of the owner's; any other failure as :data:`UNLISTED_FAILURE`. The whole text
    stays in the owner's own report (``own.failure``) and its log. A budget or terms decline is not a
    failure: the owner publishes it as ``declined`` (:data:`RUNTIME_OWNER_KEYS`), and an agent's
    decline crosses as a declared reason (:mod:`marketplace.service.declines`).

    >>> public_failure("internal error in its agent while handling a message: ValueError: row 17 is 0.3141")
    'internal error (ValueError) in its agent while handling a message'
    >>> public_failure("lost contact with curator (its connection closed: no answer to ZeroMQ heartbeats)")
    'lost contact with curator (its connection closed)'
    >>> public_failure("stc.t = 5 exceeds this owner's number of source rows; lower stc.t")
    'it failed (why stays in its own report)'
    """
    if failure is None:
        return None
    for category in PUBLIC_FAILURES:
        public = category.form(failure)
        if public is not None:
            return public
    internal = _INTERNAL.match(failure)
    if internal is None:
        return UNLISTED_FAILURE
    kind = internal["kind"] or _exception_kind(internal["rest"] or "")
    return (
        INTERNAL_ERROR
        + (f" ({kind})" if kind else "")
        + (f" in its {internal['where']}" if internal["where"] else "")
        + (f" while {internal['phase']}" if internal["phase"] else "")
    )


def _exception_kind(text: str) -> str | None:
    """The type name an internal error's text (``Type: message``, or a traceback ending in that) begins
    with, if it looks like one."""
    lines = text.splitlines()
    if lines and lines[0].startswith("Traceback"):
        frames = [i for i, line in enumerate(lines) if line.startswith(" ")]
        lines = lines[frames[-1] + 1 :] if frames else []
    head = lines[0].split(":", 1)[0].strip() if lines else ""
    return head if re.fullmatch(_EXCEPTION_KIND, head) else None


def split(protocol: str | None, role: str | None, account: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``account`` (the :data:`PARTS`) as (what the party publishes, what it keeps):
    the first has every part (None where nothing is published), the second only what is withheld, or
    published in another form (the original then), and is empty when the party withholds nothing."""
    shown = published(protocol, role, account)
    kept: dict[str, Any] = {}
    result, public = account.get("result"), shown.get("result")
    if isinstance(result, dict):
        withheld = {k: v for k, v in result.items() if not isinstance(public, dict) or public.get(k, _NONE) != v}
        if withheld:
            kept["result"] = withheld
    if account.get("timing") and shown.get("timing") is None:
        kept["timing"] = account["timing"]
    driver, public = account.get("driver"), shown.get("driver") or {}
    if isinstance(driver, dict) and (withheld := {k: v for k, v in driver.items() if k not in public}):
        kept["driver"] = withheld
    if account.get("errors_received") and account["errors_received"] != shown.get("errors_received"):
        kept["errors_received"] = account["errors_received"]
    if account.get("failure") and account["failure"] != shown.get("failure"):
        kept["failure"] = account["failure"]
    return shown, kept


def published(protocol: str | None, role: str | None, account: dict[str, Any]) -> dict[str, Any]:
    """The parts of ``account`` that a party of ``role`` may hand to another party (module docstring).
    An owner of a protocol that cannot be found publishes nothing of its result."""
    if role == "owner":
        return _owner_published(protocol, account)
    shown = {part: account.get(part) for part in PARTS}
    if role == "curator" and isinstance(shown["result"], dict) and protocol is not None and _known(protocol):
        rewrite = plugins.curator_publication(protocol)
        if rewrite is not None:
            shown["result"] = rewrite(shown["result"])
    return shown


def consumer_handover(report: dict[str, Any]) -> dict[str, Any]:
    """What the consumer of a served session hands the server that assembles and archives the run
    report (``marketplace request``): its report (:func:`~marketplace.runtime.party_reports.party_report`)
    with its parts published as an owner's are, by an allow-list: of its result only
    :data:`CONSUMER_HANDS_OVER`, none of its timings (they grow with its rows), of its driver how it was
    connected, of the error replies it received who sent them and their code, and its failure in a
    declared form (:func:`public_failure`). The rest (its status, its message counts, its noise, its
    ledger's record) goes as it is. The consumer keeps its whole report, and assembles its own copy of
    the run report with it."""
    shown = _restricted({part: report.get(part) for part in PARTS}, CONSUMER_HANDS_OVER)
    return {k: v for k, v in report.items() if k != OWN} | {k: v for k, v in shown.items() if k in report}


def _owner_published(protocol: str | None, account: dict[str, Any]) -> dict[str, Any]:
    keys = RUNTIME_OWNER_KEYS | (frozenset(plugins.spec(protocol).owner_publishes) if _known(protocol) else frozenset())
    return _restricted(account, keys)


def _restricted(account: dict[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    """``account`` as a party publishes it by an allow-list: the result's ``keys``, no timings, the
    driver's :data:`OWNER_DRIVER_KEYS`, the error replies' :data:`OWNER_ERROR_KEYS`, the failure's
    declared form."""
    result, driver, errors = account.get("result"), account.get("driver"), account.get("errors_received")
    return {
        "result": {k: v for k, v in result.items() if k in keys} if isinstance(result, dict) else None,
        "timing": None,
        "driver": {k: v for k, v in driver.items() if k in OWNER_DRIVER_KEYS} if isinstance(driver, dict) else None,
        "errors_received": (
            [{k: e[k] for k in OWNER_ERROR_KEYS if k in e} for e in errors if isinstance(e, dict)]
            if isinstance(errors, list)
            else None
        ),
        "failure": public_failure(account.get("failure")),
    }


def _known(protocol: str | None) -> TypeGuard[str]:
    return protocol is not None and protocol in plugins.protocols()


_NONE = object()
