"""`centsync doctor`: every setting, what it resolves to and whether it works, before the first
scheduled run finds out at 3 a.m. Exit code: the first problem's (docs/cli.md, exit codes)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click

from centsync.pipelines import failures as errors
from centsync.pipelines.cli.group import JSON_OUTPUT, finish, json_option
from centsync.pipelines.cli.render import echo

if TYPE_CHECKING:
    from centsync.extract import Me
    from centsync.pipelines.results import Check
    from centsync.pipelines.settings import Settings

# below this, a refresh may not find room for its working copy (it copies the warehouse)
MIN_FREE_MB = 200
# a no-change refresh spends about 30 requests; fewer left this hour and it may wait
MIN_HOUR_ALLOWANCE = 60


def _check(
    name: str,
    status: Literal["ok", "warn", "fail"],
    value: str,
    detail: str = "",
    exit_code: int = 0,
) -> Check:
    """One thing checked (`results.Check`, imported when a check is made, not with the CLI)."""
    from centsync.pipelines.results import Check

    return Check(name=name, status=status, value=value, detail=detail, exit_code=exit_code)


def _fail(name: str, value: str, exc: BaseException) -> Check:
    """A failed check named by the error it met, with that error's exit code and message."""
    failure = errors.from_exception(exc)
    todo = failure.kind.todo if failure.kind.todo not in failure.message else ""
    detail = f"{failure.message} {todo}".strip()
    return _check(name, "fail", value, detail, failure.code if failure.code != 1 else 5)


@click.command()
@json_option("Print the checks as one JSON object.")
@click.option(
    "--contract-report",
    "contract_report",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=None,
    help="Also write FILE: each API surface's state and the shapes of its answers (key names, "
    "JSON types, nesting; never a value, amount, id, name or the key), to attach to a bug report.",
)
def doctor(as_json: bool, contract_report: Path | None) -> None:
    """Check the set-up: settings, service, key, warehouse, Dagster, schedules, disk, alerts,
    and the service's contract (each API surface: documented, learned, pinned or unavailable).

    Exit code: 0 when all is well (warnings included), else the first problem's.

    Example: centsync doctor --json | jq '.checks[] | select(.status != "ok")'
    """
    from centsync.extract import ConfigurationError
    from centsync.pipelines.settings import Settings

    JSON_OUTPUT.set(as_json)
    config: Settings | None = None
    try:
        config = Settings.from_env()
    except ConfigurationError as exc:
        checks = [_fail("settings", "the environment", exc)]
    else:
        if contract_report is not None:  # rewritten at will; never over a file centsync keeps
            from centsync.pipelines.kept import guard_output

            guard_output(contract_report, config, force=True, flag="--contract-report")
        checks = [_check("settings", "ok", "read from the environment")]
        checks += run_checks(config)
    contract = _contract(config, contract_report, checks)
    code = next((c.exit_code for c in checks if c.status == "fail"), 0)
    from centsync.pipelines.results import DoctorResult

    result = DoctorResult.model_validate(
        {
            "status": "ok" if code == 0 else "problem",
            "checks": checks,
            "settings": resolved(config) if config else [],
            "contract": contract,
        }
    )
    finish(result, as_json, lambda: _render(checks, config, code, contract), exit_code=code)


def _contract(config: Settings | None, report: Path | None, checks: list[Check]) -> dict[str, Any]:
    """The contract section (from the warehouse's ops.contract) and, when asked, its report
    (written; a check says where, or why not)."""
    from centsync.pipelines.outputs import contract_report as contract

    con = None
    if config is not None and config.warehouse.exists():
        from centsync.warehouse import connect_readonly

        try:
            con = connect_readonly(config.warehouse)
        except Exception:  # damaged or locked: the warehouse check above says which
            con = None
    try:
        learned, rows = contract.surfaces(con)
        if report is not None:
            secrets = [config.api_key] if config is not None else []
            try:
                contract.write_report(report, con, secrets)
            except OSError as exc:
                detail = f"could not write it: {exc.strerror}; choose a file in a folder you own"
                checks.append(_check("contract_report", "fail", str(report), detail, errors.USAGE))
            else:
                detail = "shapes only: key names, JSON types, nesting; never a value"
                checks.append(_check("contract_report", "ok", str(report), detail))
    finally:
        if con is not None:
            con.close()
    note = "" if learned else contract.NOTHING_LEARNED
    return {"learned": learned, "note": note, "surfaces": rows}


def resolved(config: Settings) -> list[dict[str, str]]:
    """Every setting's variable and what it resolves to (a secret only as set or not)."""
    from centsync.pipelines.settings import reference

    out = []
    for entry in reference():
        f = next(f for f in dataclasses.fields(config) if f.name == entry["field"])
        value = getattr(config, f.name)
        if f.metadata["secret"]:
            shown = "set (not shown)" if value else "not set"
        elif value in ("", None):
            shown = f"not set: {entry['default']}"
        elif f.name in ("data_home", "config_home"):
            # the variable's own value (the setting is `<it>/centsync`), and centsync's folder
            shown = f"{Path(value).parent} (centsync's folder: {value})"
        else:
            shown = str(value)
        out.append({"env": entry["env"], "value": shown})
    return out


def run_checks(config: Settings) -> list[Check]:
    """Every check after the settings, in the order a refresh meets them."""
    checks = _warehouse(config)
    mismatch = any(c.name == "binding" and c.status == "fail" for c in checks)
    checks += _service(config, skip_embedded=mismatch)
    checks += _dagster(config)
    checks.append(_disk(config))
    checks.append(_private(config))
    checks.append(_alerts(config))
    if config.owners_file.is_file():
        checks.append(_allocator())
    return checks


def _allocator() -> Check:
    """For many owners (an owners file): the allocator `refresh --all` starts on, jemalloc when
    the system has it (console.py: about 10 % less CPU an owner, docs/scale.md)."""
    from centsync.pipelines.cli.console import jemalloc

    library = jemalloc()
    if library is not None:
        detail = "refresh --all starts on it, unless LD_PRELOAD is set"
        return _check("allocator", "ok", f"jemalloc ({library})", detail)
    detail = (
        "refresh --all would spend about 10 % less CPU an owner on jemalloc: install it "
        "(Debian, Ubuntu: apt-get install libjemalloc2; docs/scale.md)"
    )
    return _check("allocator", "ok", "glibc's malloc", detail)


def _private(config: Settings) -> Check:
    """What centsync keeps is its owner's alone: a warning naming each file or folder another
    user of the machine may read, with the chmod that closes it (docs/operations.md)."""
    from centsync.pipelines.kept import exposed, private_paths

    found = exposed(private_paths(config))
    if not found:
        return _check("private", "ok", "only you can read what centsync keeps")
    names = ", ".join(str(p) for p, _ in found)
    fixes = "; ".join(chmod for _, chmod in found)
    detail = f"readable by other users of this machine: {names}. Run: {fixes}"
    return _check("private", "warn", f"{len(found)} readable by others", detail)


def _warehouse(config: Settings) -> list[Check]:
    """The warehouse file: where, readable, its binding; its folder writable."""
    from centsync.pipelines.refresh import binding
    from centsync.pipelines.refresh.binding import SourceMismatch

    path = config.warehouse
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not os.access(folder, os.W_OK):
        detail = f"{folder} is not writable: set CENTSYNC_WAREHOUSE to a file in a folder you own."
        return [_check("warehouse", "fail", str(path), detail, errors.WAREHOUSE)]
    if not path.exists():
        first = "not there yet: the first `centsync refresh` creates it"
        return [_check("warehouse", "ok", str(path), first)]
    try:
        bound = binding.read(path)
    except Exception as exc:  # damaged, locked by another program: the check says which
        return [_fail("warehouse", str(path), exc)]
    size = f"{path.stat().st_size / 2**20:.1f} MB, readable"
    checks = [_check("warehouse", "ok", str(path), size)]
    if bound is None:
        checks.append(_check("binding", "ok", "not bound yet", "the first refresh binds it"))
        return checks
    source = _source(config)
    try:
        binding.check(path, source, None)
    except SourceMismatch as exc:
        checks.append(_fail("binding", bound.describe(), exc))
    else:
        checks.append(_check("binding", "ok", bound.describe(), "the configured service"))
    return checks


def _source(config: Settings) -> str:
    """The source name the configured service binds a warehouse to."""
    from centsync.pipelines.embedded import embedded_source

    return embedded_source() if config.embedded else config.api_base_url


def _service(config: Settings, *, skip_embedded: bool) -> list[Check]:
    """The service: reachable (TLS), the key valid, its scopes, expiry and allowance."""
    from centsync.pipelines.embedded import embedded_api

    where = "the embedded sandbox" if config.embedded else config.api_base_url
    if config.embedded and skip_embedded:
        detail = "not started: the warehouse belongs to another source (see binding)"
        return [_check("service", "warn", where, detail)]
    with embedded_api(config, rebind=True) as api:
        return _ask(api, where)


def _ask(api: Settings, where: str) -> list[Check]:
    """GET /v1/me with the key, and what its answer says."""
    from centsync.extract import ApiClient

    # a doctor does not wait out a rate limit: it says so
    quick = dataclasses.replace(api, max_wait=5.0)
    started = time.monotonic()
    try:
        with ApiClient.from_settings(quick, concurrency=1) as client:
            me = client.me()
    except Exception as exc:
        failure = errors.from_exception(exc)
        name = "key" if failure.code == 3 else "service"
        return [_fail(name, where, exc)]
    took = f"reachable, answered in {time.monotonic() - started:.2f} s"
    checks = [_check("service", "ok", where, took), _tls(api.api_base_url)]
    checks.append(_check("key", "ok", f"valid, owner {me.account_id}", f"key id {me.key_id}"))
    return checks + _key_facts(me)


def _tls(url: str) -> Check:
    """Whether the connection is encrypted (and verified: a failed verification fails above)."""
    host = url.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0]
    if url.startswith("https://"):
        return _check("tls", "ok", "https", "certificate verified")
    if host in ("127.0.0.1", "localhost", "::1", "[::1]"):
        return _check("tls", "ok", "http on loopback", "nothing leaves this machine")
    detail = "the key travels unencrypted: use the service's https:// URL"
    return _check("tls", "warn", "http", detail)


def _key_facts(me: Me) -> list[Check]:
    """The key's scopes, expiry and what is left of its allowance."""
    import datetime as dt

    from centsync.transform.contract import key_expires_soon

    scopes = ", ".join(me.scopes) or "none"
    if "data.read" not in me.scopes:
        detail = "the key cannot read: create one with the data.read scope"
        checks = [_check("scopes", "fail", scopes, detail, 3)]
    elif not me.can_write:
        detail = "read only: refreshes work; `centsync writeback` needs data.write"
        checks = [_check("scopes", "ok", scopes, detail)]
    else:
        checks = [_check("scopes", "ok", scopes, "reads and writes")]
    at = me.key_expires_at
    if at is None:
        checks.append(_check("key_expiry", "ok", "never", ""))
    elif key_expires_soon(at, dt.datetime.now(dt.UTC)):
        detail = "within 30 days: create a new key and set CENTSYNC_API_KEY before then"
        checks.append(_check("key_expiry", "warn", at.isoformat(timespec="seconds"), detail))
    else:
        checks.append(_check("key_expiry", "ok", at.isoformat(timespec="seconds"), ""))
    left = (
        f"{_count(me.minute_remaining)} of {_count(me.minute_limit)} left this minute, "
        f"{_count(me.hour_remaining)} of {_count(me.hour_limit)} this hour"
    )
    low = me.hour_remaining is not None and me.hour_remaining < MIN_HOUR_ALLOWANCE
    detail = "little left this hour: a refresh may wait for the next" if low else ""
    checks.append(_check("allowance", "warn" if low else "ok", left, detail))
    return checks


def _count(n: int | None) -> str:
    """A count of requests for a person (9,980), or "?" when the service did not say."""
    return "?" if n is None else f"{n:,}"


def _dagster(config: Settings) -> list[Check]:
    """The Dagster home (run history) and the schedules: on, and something to run them."""
    from centsync.pipelines.cli import runner
    from centsync.pipelines.cli.schedule import schedules_state

    home = config.dagster_home
    try:
        runner.dagster_home(config)
        state = schedules_state(config)
    except Exception as exc:
        return [_fail("dagster_home", str(home), exc)]
    checks = [_check("dagster_home", "ok", str(home), "this warehouse's run history")]
    on = [s["name"] for s in state["schedules"] if s["on"]]
    if not on:
        checks.append(_check("schedules", "ok", "all off", "`centsync schedule on` turns them on"))
    elif state["daemon_running"]:
        checks.append(_check("schedules", "ok", ", ".join(on), "the daemon is running"))
    else:
        detail = "on, but no daemon runs them: start `centsync daemon` (docs/operations.md)"
        checks.append(_check("schedules", "warn", ", ".join(on), detail))
    return checks


def _disk(config: Settings) -> Check:
    """Room for a refresh: it writes a working copy of the warehouse beside it."""
    folder = config.warehouse.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    free = shutil.disk_usage(folder).free / 2**20
    size = config.warehouse.stat().st_size / 2**20 if config.warehouse.exists() else 0.0
    need = max(MIN_FREE_MB, 2 * size)
    value = f"{free:,.0f} MB free in {folder}"
    if free < need:
        detail = f"a refresh needs about {need:,.0f} MB: free some space"
        return _check("disk", "fail", value, detail, errors.WAREHOUSE)
    return _check("disk", "ok", value, "")


def _alerts(config: Settings) -> Check:
    """The alert URL: set, and one Apprise knows (it is never shown: it may hold a token)."""
    if not config.alert_url:
        return _check("alerts", "ok", "off", "set CENTSYNC_ALERT_URL to be told of problems")
    import apprise

    sender = apprise.Apprise()
    bad = [i for i, url in enumerate(config.alert_url.split(), 1) if not sender.add(url)]
    if bad:
        detail = f"URL {bad[0]} of CENTSYNC_ALERT_URL is not one Apprise knows: fix it"
        return _check("alerts", "fail", "set (not shown)", detail, 2)
    return _check("alerts", "ok", f"set (not shown), {len(sender)} destination(s)", "")


MARKS = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}


def _render(
    checks: list[Check], config: Settings | None, code: int, contract: dict[str, Any]
) -> None:
    """The checks, one a line, then every setting, the contract, then the verdict."""
    for c in checks:
        tail = f"  {c.detail}" if c.detail else ""
        echo(f"{MARKS[c.status]}  {c.name:<13} {c.value}{tail}")  # hints as the person runs them
    if config is not None:
        click.echo("\nSettings:")
        for s in resolved(config):
            click.echo(f"  {s['env']:<26} {s['value']}")
    click.echo("\nContract (each API surface):" + (f" {contract['note']}" * bool(contract["note"])))
    for r in contract["surfaces"]:
        click.echo(f"  {r['surface']:<35} {r['state']:<15} {r['detail']}")
    first = next((c for c in checks if c.status == "fail"), None)
    if first is None:
        warned = sum(c.status == "warn" for c in checks)
        click.echo(f"\nAll is well{f' ({warned} warnings above)' if warned else ''}.")
    else:
        echo(f"\nProblem: {first.name}: {first.detail} (exit {code})")
