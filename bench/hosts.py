"""Herald across five hosts on one machine: network namespaces joined by veth pairs to one bridge.

    python -m bench.hosts [--triggers 20000] [--sockets 1000] [--cut-seconds 30] [--lease-seconds 10]

Needs root and ``ip netns``; without them it says why and exits 0 (skipped).

The hosts, each a network namespace with one interface on 10.77.0.0/24:

- ``db`` (.10): a PostgreSQL cluster of the run's own (``initdb`` into a temp folder).
- ``api`` (.20): ``herald serve --no-worker``.
- ``worker1`` (.31) and ``worker2`` (.32): ``herald worker`` each.
- ``clients`` (.40): this script's second half, which sends the triggers and holds the Inbox sockets.

Every Herald process gets the same ``HERALD_SECRET_KEY`` and the database's
address, and a data folder of its own: nothing is shared but the store. The
run: ``--sockets`` subscribers connect their socket to the API host; the
triggers (one in-app message each, to those subscribers in turn, 100 to a bulk
request) go out in three parts. After the first, worker1's host is cut off
the network (its link on the bridge goes down) for ``--cut-seconds``, and
worker2's process is killed (SIGKILL) and started again on its host, as a
supervisor would; the second part is sent while worker1 is away, the third
after it is back. Then the script checks, from the store and the sockets:

- every trigger made exactly one in-app message (none lost, none twice);
- every socket got ``notification_received`` for its messages (live events
  cross from the worker hosts to the API host through PostgreSQL);
- the jobs worker1 held when it was cut off were finished by another worker
  after their lease (``--lease-seconds``, short so the run is short) ran out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

NET = "10.77.0"
HOSTS = {"db": 10, "api": 20, "worker1": 31, "worker2": 32, "clients": 40}
PORT = 8000
BULK = 100


def say(text: str) -> None:
    print(f"[bench.hosts {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def run(*command: str, check: bool = True, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(command), capture_output=True, text=True, **kwargs)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip() or done.stdout.strip()}")
    return done


@dataclass
class Network:
    """The namespaces (``<prefix>-<host>``), their veth pairs, and the bridge that joins them."""

    prefix: str
    made: list[str] = field(default_factory=list)

    def ns(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    @property
    def switch(self) -> str:
        return f"{self.prefix}-sw"

    def address(self, host: str) -> str:
        return f"{NET}.{HOSTS[host]}"

    def port_of(self, host: str) -> str:
        """The bridge's end of the host's veth pair (15 characters at most)."""
        return f"hv{self.prefix[-5:]}{HOSTS[host]}"

    def exec(self, host: str, *command: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns(host), *command]

    def create(self) -> None:
        for name in [self.switch, *(self.ns(host) for host in HOSTS)]:
            run("ip", "netns", "add", name)
            self.made.append(name)
            run("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up")
        run("ip", "netns", "exec", self.switch, "ip", "link", "add", "br0", "type", "bridge")
        run("ip", "netns", "exec", self.switch, "ip", "link", "set", "br0", "up")
        for host in HOSTS:
            outer, inner = self.port_of(host), f"he{self.prefix[-5:]}{HOSTS[host]}"
            run("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
            run("ip", "link", "set", outer, "netns", self.switch)
            run("ip", "link", "set", inner, "netns", self.ns(host))
            run(*self.exec(host, "ip", "link", "set", inner, "name", "eth0"))
            run(*self.exec(host, "ip", "addr", "add", f"{self.address(host)}/24", "dev", "eth0"))
            run(*self.exec(host, "ip", "link", "set", "eth0", "up"))
            run("ip", "netns", "exec", self.switch, "ip", "link", "set", outer, "master", "br0")
            run("ip", "netns", "exec", self.switch, "ip", "link", "set", outer, "up")

    def link(self, host: str, up: bool) -> None:
        """Cut a host off the network, or join it again: its port on the bridge goes down or up."""
        run("ip", "netns", "exec", self.switch, "ip", "link", "set", self.port_of(host), "up" if up else "down")

    def remove(self) -> None:
        for name in reversed(self.made):
            run("ip", "netns", "del", name, check=False)


def can_run() -> str | None:
    """Why the harness cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if shutil.which("ip") is None:
        return "needs the ip command (iproute2)"
    probe = f"hprobe{os.getpid()}"
    if run("ip", "netns", "add", probe, check=False).returncode != 0:
        return "ip netns add failed: no network namespaces here"
    run("ip", "netns", "del", probe, check=False)
    if bindir() is None:
        return "needs PostgreSQL's server programs (initdb, pg_ctl)"
    return None


def bindir() -> Path | None:
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0)
    for candidate in reversed(versions):
        if (candidate / "initdb").exists():
            return candidate
    return None


@dataclass
class Database:
    """A PostgreSQL cluster on the db host, listening on its address only."""

    network: Network
    folder: Path

    def as_postgres(self, *command: str) -> list[str]:
        return self.network.exec("db", "runuser", "-u", "postgres", "--", *command)

    def start(self) -> None:
        programs = bindir()
        assert programs is not None
        shutil.chown(self.folder, "postgres")
        data = self.folder / "data"
        run(*self.as_postgres(str(programs / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"))
        with (data / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {NET}.0/24 trust\n")
        options = (
            f"-p 5432 -k {self.folder} -c listen_addresses={self.network.address('db')} "
            "-c fsync=off -c synchronous_commit=off -c max_connections=200"
        )
        run(*self.as_postgres(str(programs / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(self.folder / "server.log"), "-w", "start"))

    def stop(self) -> None:
        programs = bindir()
        if programs is not None and (self.folder / "data").exists():
            run(*self.as_postgres(str(programs / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate", "stop"), check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hosts", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--triggers", type=int, default=20_000, help="triggers sent in all (default 20,000; the full run is 100,000)")
    parser.add_argument("--sockets", type=int, default=1000, help="Inbox sockets connected from the clients host (default 1,000)")
    parser.add_argument("--cut-seconds", type=float, default=30.0, help="how long worker1's host is off the network (default 30)")
    parser.add_argument("--lease-seconds", type=float, default=10.0, help="HERALD_JOB_LEASE_SECONDS of the workers (default 10)")
    parser.add_argument("--no-write", action="store_true", help="print the figures only; write no result file")
    parser.add_argument("--results", default=str(Path(__file__).resolve().parent / "results"), help="folder for the run's JSON file (default bench/results)")
    parser.add_argument("--inside", help=argparse.SUPPRESS)  # the clients host's half, with the run's settings as JSON
    args = parser.parse_args(argv)
    if args.inside:
        return asyncio.run(clients_half(json.loads(args.inside)))
    reason = can_run()
    if reason:
        print(f"bench.hosts skipped: {reason}")
        return 0
    folder = Path(tempfile.mkdtemp(prefix="herald-hosts-"))
    folder.chmod(0o755)
    network = Network(prefix=f"hh{os.getpid() % 100000}")
    database = Database(network, folder / "pg")
    database.folder.mkdir()
    try:
        say(f"hosts {', '.join(f'{host} {network.address(host)}' for host in HOSTS)}; folder {folder}")
        network.create()
        database.start()
        settings = {
            "prefix": network.prefix, "folder": str(folder), "triggers": args.triggers, "sockets": args.sockets,
            "cut_seconds": args.cut_seconds, "lease_seconds": args.lease_seconds,
            "write": not args.no_write, "results": args.results,
        }
        # The second half runs on the clients host: everything it reaches, it reaches over the network.
        command = network.exec("clients", sys.executable, "-m", "bench.hosts", "--inside", json.dumps(settings))
        return subprocess.run(command, cwd=Path(__file__).resolve().parent.parent, check=False).returncode
    finally:
        database.stop()
        network.remove()
        shutil.rmtree(folder, ignore_errors=True)


# The clients host's half ---------------------------------------------------------------------------


@dataclass
class Herald:
    """Herald's processes on their hosts."""

    network: Network
    folder: Path
    env: dict[str, str]
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def host_env(self, host: str) -> dict[str, str]:
        data = self.folder / f"data-{host}"  # each host's own folder: nothing shared but the store
        data.mkdir(exist_ok=True)
        return {**self.env, "HERALD_DATA_DIR": str(data)}

    def cli(self, host: str, *args: str) -> str:
        from bench.harness import herald_command

        return run(*self.network.exec(host, *herald_command(), *args), env=self.host_env(host), timeout=300).stdout

    def start(self, name: str, host: str, *args: str) -> None:
        from bench.harness import herald_command

        log = (self.folder / f"{name}.log").open("ab")
        self.processes[name] = subprocess.Popen(
            self.network.exec(host, *herald_command(), *args), env=self.host_env(host), stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def stop_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def herald_pid(process: subprocess.Popen[bytes]) -> int:
    """The herald process under ``ip netns exec`` (which execs it: the same pid)."""
    return process.pid


def cpu_by_tier(herald: Herald, folder: Path) -> dict[str, float]:
    """CPU seconds used so far by the API process, the worker processes and PostgreSQL (all its processes)."""
    from bench.harness import cpu_seconds, descendants

    postmaster = int((folder / "pg" / "data" / "postmaster.pid").read_text().split()[0])
    workers = [process.pid for name, process in herald.processes.items() if name.startswith("worker") and process.poll() is None]
    return {
        "api": cpu_seconds(herald.processes["api"].pid),
        "workers": sum(cpu_seconds(pid) for pid in workers),
        "postgresql": sum(cpu_seconds(pid) for pid in [postmaster, *descendants(postmaster)]),
    }


async def drained(store: Any, sent: int, timeout: float = 600.0) -> int:
    """Wait until ``sent`` in-app messages are stored and no job is left; the messages stored."""
    deadline = time.monotonic() + timeout
    stored = 0
    while time.monotonic() < deadline:
        stored = int(await store.fetchval("SELECT count(*) FROM messages WHERE channel = 'in_app'"))
        open_jobs = int(await store.fetchval("SELECT count(*) FROM jobs WHERE status IN ('queued', 'delayed', 'running')"))
        if stored >= sent and not open_jobs:
            return stored
        await asyncio.sleep(0.5)
    return stored


def write_result(settings: dict[str, Any], report: dict[str, Any], ok: bool, started: datetime) -> None:
    """The run's file in bench/results/ (``…-postgres-hosts.json``): one row with every figure."""
    from bench import results
    from bench.report import Row, verdict

    row = Row(
        "Five hosts: a worker host cut off and the other worker killed",
        f"{report['lost']} lost, {report['transactions_not_exactly_one_message']} not exactly once, "
        f"{report['messages_not_seen_live']} not seen live; {report['of_those_finished_elsewhere']} of "
        f"{report['jobs_held_by_the_cut_worker']} held jobs finished by another worker",
        "nothing lost or doubled; every event reaches its socket; held jobs taken over",
        verdict(ok),
        float(report["lost"]),
        "messages",
        report,
    )
    command = "python -m bench.hosts " + " ".join(f"--{key.replace('_', '-')} {settings[key]}" for key in ("triggers", "sockets", "cut_seconds", "lease_seconds"))
    record = results.record(
        kind="hosts", store="postgres", server="uvicorn", workers=2, title="PostgreSQL · five hosts (network namespaces)",
        command=command, settings={key: settings[key] for key in ("triggers", "sockets", "cut_seconds", "lease_seconds")},
        notes=[], rows=[row], started=started, finished=datetime.now(UTC), source="python -m bench.hosts",
    )
    say(f"written to {results.write(record, Path(settings['results']))}")


async def clients_half(settings: dict[str, Any]) -> int:
    import secrets

    import asyncpg
    import httpx

    from bench import realtime
    from bench.harness import UNLIMITED, Environment, Store

    network = Network(prefix=settings["prefix"])
    folder = Path(settings["folder"])
    triggers, socket_count = int(settings["triggers"]), int(settings["sockets"])
    db_url = f"postgresql://postgres@{network.address('db')}:5432/herald"
    admin = await asyncpg.connect(f"postgresql://postgres@{network.address('db')}:5432/postgres")
    await admin.execute("CREATE DATABASE herald")
    await admin.close()
    secret_key = secrets.token_urlsafe(32)
    env = {
        **os.environ, **UNLIMITED, "HERALD_DATABASE_URL": db_url, "HERALD_SECRET_KEY": secret_key,
        "HERALD_JOB_LEASE_SECONDS": str(settings["lease_seconds"]),
    }
    herald = Herald(network, folder, env)
    started = time.monotonic()
    started_at = datetime.now(UTC)
    try:
        herald.cli("api", "migrate")
        boot = json.loads(herald.cli("api", "bootstrap", "--json"))
        development = next(item for item in boot["environments"] if item["name"] == "Development")
        api_url = f"http://{network.address('api')}:{PORT}"
        herald.start("api", "api", "serve", "--no-worker", "--host", network.address("api"), "--port", str(PORT))
        herald.start("worker1", "worker1", "worker")
        herald.start("worker2", "worker2", "worker")
        async with httpx.AsyncClient(base_url=api_url, headers={"Authorization": f"ApiKey {development['apiKey']}"}, timeout=60) as client:
            for _ in range(200):
                try:
                    if (await client.get("/v1/health-check")).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.25)
            created = await client.post(
                "/v1/workflows",
                json={"name": "Hosts", "active": True,
                      "steps": [{"name": "inbox", "template": {"type": "in_app", "content": "Hello {{payload.seq}}"}}]},
            )
            created.raise_for_status()
            workflow = created.json()["data"]["triggers"][0]["identifier"]
            environment = Environment(folder, Store("postgres", db_url), secret_key=secret_key)
            environment.organization_id, environment.environment_id = str(boot["organizationId"]), str(development["_id"])
            subscribers = await realtime.seed(environment, socket_count)
            sockets = await realtime.connect_all(api_url, [token for _, token in subscribers])
            say(f"{len(sockets)} sockets connected to {api_url} from {network.address('clients')}")

            async def send(first: int, last: int) -> int:
                accepted = 0
                for start in range(first, last, BULK):
                    events = [
                        {"name": workflow, "to": subscribers[seq % socket_count][0], "payload": {"seq": seq}, "transactionId": f"hosts-{seq}"}
                        for seq in range(start, min(last, start + BULK))
                    ]
                    answer = await client.post("/v1/events/trigger/bulk", json={"events": events})
                    answer.raise_for_status()
                    accepted += sum(1 for item in answer.json()["data"] if item.get("status") == "processed")
                return accepted

            thirds = [0, triggers // 3, 2 * triggers // 3, triggers]
            store = await asyncpg.connect(db_url)
            # The first third with no fault, drained before the next: each tier's CPU for a trigger.
            before = cpu_by_tier(herald, folder)
            clock = time.monotonic()
            sent = await send(thirds[0], thirds[1])
            await drained(store, sent)
            spent = {tier: seconds - before[tier] for tier, seconds in cpu_by_tier(herald, folder).items()}
            cpu_per_trigger = {f"{tier}_cpu_us_per_trigger": round(seconds / sent * 1e6) for tier, seconds in spent.items()}
            clean_rate = round(sent / (time.monotonic() - clock))
            say(f"first third: {sent} triggers delivered at {clean_rate}/s; CPU a trigger {cpu_per_trigger}")
            # The fault, while the second third is on its way: once worker1 holds jobs, its host goes off
            # the network, and worker2's process is killed and started again.
            worker1_pid = herald_pid(herald.processes["worker1"])
            holding = "SELECT id FROM jobs WHERE status = 'running' AND locked_by LIKE $1"
            second = asyncio.create_task(send(thirds[1], thirds[2]))
            for _ in range(400):
                if await store.fetchval(holding.replace("SELECT id", "SELECT count(*)"), f"%:{worker1_pid}:%") or second.done():
                    break
                await asyncio.sleep(0.05)
            network.link("worker1", up=False)
            cut_at = time.monotonic()
            held = [row["id"] for row in await store.fetch(holding, f"%:{worker1_pid}:%")]
            worker2_pid = herald_pid(herald.processes["worker2"])
            os.killpg(herald.processes["worker2"].pid, signal.SIGKILL)
            herald.processes["worker2"].wait()
            herald.start("worker2", "worker2", "worker")
            say(f"worker1 cut off holding {len(held)} jobs; worker2 killed and started again")
            sent += await second
            await asyncio.sleep(max(0.0, settings["cut_seconds"] - (time.monotonic() - cut_at)))
            # Before worker1 is back: what its connections are doing, and who holds the jobs it held.
            away = {
                "worker1_connections": {row["state"]: row["n"] for row in await store.fetch(
                    "SELECT coalesce(state, '?') AS state, count(*) AS n FROM pg_stat_activity WHERE client_addr = $1::inet GROUP BY 1",
                    network.address("worker1"),
                )},
                "held_jobs_still_running_for_worker1": int(await store.fetchval(
                    "SELECT count(*) FROM jobs WHERE id = ANY($1::text[]) AND status = 'running' AND locked_by LIKE $2", held, f"%:{worker1_pid}:%"
                )),
            }
            say(f"before worker1 is back: {away}")
            network.link("worker1", up=True)
            say(f"worker1 back after {time.monotonic() - cut_at:.0f} s")
            sent += await send(thirds[2], thirds[3])

            stored = await drained(store, sent, timeout=max(300.0, triggers / 50))
            # The last messages' events on their way to the sockets: until all are in, or none came for 10 s.
            last_count, last_change = -1, time.monotonic()
            while time.monotonic() - last_change < 10.0:
                count = len({seq for socket in sockets for seq in socket.received})
                if count >= sent:
                    break
                if count != last_count:
                    last_count, last_change = count, time.monotonic()
                await asyncio.sleep(0.5)
            events_settled = round(time.monotonic() - cut_at, 1)
            per_transaction = await store.fetch(
                "SELECT transaction_id, count(*) AS made FROM messages WHERE channel = 'in_app' GROUP BY transaction_id HAVING count(*) <> 1"
            )
            transactions = int(await store.fetchval("SELECT count(DISTINCT transaction_id) FROM messages WHERE channel = 'in_app'"))
            taken_over = await store.fetch(
                "SELECT id, status, locked_by, attempts FROM jobs WHERE id = ANY($1::text[])", held
            )
            received = [seq for socket in sockets for seq in socket.received]
            missed = sorted(set(range(sent)) - set(received))
            # Who made the messages no socket heard of, and when (seconds after the cut).
            pids = {str(worker1_pid): "worker1", str(worker2_pid): "worker2 (killed)", str(herald_pid(herald.processes["worker2"])): "worker2 (again)"}
            rows = await store.fetch(
                "SELECT m.transaction_id, extract(epoch from m.created_at) AS made, j.locked_by, j.attempts, j.kind"
                " FROM messages AS m LEFT JOIN jobs AS j ON j.id = m.job_id WHERE m.transaction_id = ANY($1::text[])",
                [f"hosts-{seq}" for seq in missed[:50]],
            )
            cut_wall = time.time() - (time.monotonic() - cut_at)
            missed_made_by = [
                {"seq": row["transaction_id"], "after_cut_s": round(float(row["made"]) - cut_wall, 1), "attempts": row["attempts"], "kind": row["kind"],
                 "by": pids.get((row["locked_by"] or "::").split(":")[1], row["locked_by"])}
                for row in rows
            ]
            await store.close()
        live = len(set(received))
        missed_by_part = [sum(1 for seq in missed if thirds[part] <= seq < thirds[part + 1]) for part in range(3)]
        report = {
            "triggers_sent": sent,
            "messages_stored": stored,
            "transactions_with_a_message": transactions,
            "lost": sent - transactions,
            "transactions_not_exactly_one_message": len(per_transaction),
            "sockets": len(sockets),
            "live_events_received": len(received),
            "messages_seen_live": live,
            "messages_not_seen_live": sent - live,
            "not_seen_live_by_part": missed_by_part,
            "not_seen_live_made_by": missed_made_by[:10],
            "seconds_from_the_cut_to_the_last_event": events_settled,
            "jobs_held_by_the_cut_worker": len(held),
            "of_those_finished": sum(1 for row in taken_over if row["status"] in ("completed", "failed")),
            "of_those_finished_elsewhere": sum(1 for row in taken_over if row["status"] in ("completed", "failed") and f":{worker1_pid}:" not in (row["locked_by"] or "")),
            "of_those_tried_more_than_once": sum(1 for row in taken_over if row["attempts"] > 1),
            **away,
            "first_third_triggers_per_s": clean_rate,
            **cpu_per_trigger,
            "seconds": round(time.monotonic() - started, 1),
        }
        # What the API process said when it could not send a socket its event (herald/realtime/server.py).
        api_log = (folder / "api.log").read_text(errors="replace").splitlines()
        report["api_could_not_read_what_to_send"] = sum(1 for line in api_log if "could not read what to send" in line)
        report["api_log_warnings_first"] = [line[:300] for line in api_log if "WARNING" in line or "Error" in line][:5]
        for socket in sockets:
            await socket.close()
        print(json.dumps(report, indent=2))
        ok = report["lost"] == 0 and report["transactions_not_exactly_one_message"] == 0 and report["messages_not_seen_live"] == 0
        ok = ok and report["of_those_finished"] == report["jobs_held_by_the_cut_worker"]
        say("all checks hold" if ok else "a check failed: see the figures above")
        if settings.get("write", True):
            write_result(settings, report, ok, started_at)
        return 0 if ok else 1
    finally:
        herald.stop_all()


if __name__ == "__main__":
    raise SystemExit(main())
