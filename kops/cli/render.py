"""Rich rendering of topology and health for people (imported only by the commands)."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kops.health import CRITICAL, PROBLEM, QUORUM_BEHIND_S, WARNING, HealthReport
from kops.inputs.values import human_bytes
from kops.model import Quorum, Topology

_SEV_STYLE = {CRITICAL: "bold red", PROBLEM: "yellow", WARNING: "cyan"}


def _ids(xs) -> str:
    return ",".join(str(x) for x in xs)


def render_topology(con: Console, topo: Topology) -> None:
    leaders = Counter(p.leader for p in topo.partitions() if p.leader is not None)
    replicas = Counter(b for p in topo.partitions() for b in p.replicas)
    head = (f"cluster {topo.cluster_id or '?'}  mode {topo.mode or '?'}  kafka {topo.kafka_versions() or '?'}  "
            f"controller {topo.controller}")
    con.print(f"[bold]{escape(head)}[/bold]")

    sampled = topo.load_sample is not None
    caps = any(b.capacity is not None for b in topo.brokers)
    bytes_in: Counter = Counter()
    if sampled:
        for p in topo.partitions():
            for b in p.replicas:  # every replica takes its partition's bytes-in (network in)
                bytes_in[b] += p.bytes_in_per_s or 0.0
    bt = Table(title="Brokers", title_justify="left")
    mixed = " - " in (topo.kafka_versions() or "")  # brokers on different releases: say which runs what
    cols = ["id", "host:port", "rack", "alive", "replicas", "leaders", "throttles"] + (["kafka"] if mixed else [])
    cols += ["bytes in/s"] if sampled else []
    cols += ["disk", "network in/out"] if caps else []
    for col in cols:
        bt.add_column(col, justify="right" if col in ("id", "replicas", "leaders", "bytes in/s") else "left")
    for b in sorted(topo.brokers, key=lambda b: b.id):
        thr = ", ".join(f"{k.split('.')[0]}={v}" for k, v in sorted(b.configs.items())) or "-"
        row = [
            str(b.id),
            f"{b.host}:{b.port}" if b.host else "-",
            escape(b.rack or "-"),
            ("[green]yes[/green]" if b.alive else "[red]DOWN[/red]") + (" [yellow]cordoned[/yellow]" if b.cordoned else ""),
            str(replicas[b.id]),
            str(leaders[b.id]),
            escape(thr),
        ] + ([b.kafka_version or "?"] if mixed else [])
        if sampled:
            row.append(human_bytes(int(bytes_in[b.id])) + "/s")
        if caps:
            c = b.capacity
            row.append(human_bytes(c.disk_bytes) if c is not None and c.disk_bytes else "-")
            row.append(f"{human_bytes(int(c.nw_in_bytes_per_s))}/s / {human_bytes(int(c.nw_out_bytes_per_s))}/s"
                       if c is not None and c.nw_in_bytes_per_s and c.nw_out_bytes_per_s else "-")
        bt.add_row(*row)
    con.print(bt)
    if topo.quorum is not None:
        render_quorum(con, topo.quorum)

    tt = Table(title="Partitions", title_justify="left")
    longest = min(60, max((len(t.name) for t in topo.topics), default=5))
    pcols = ["topic", "partition", "replicas", "isr", "leader", "size"] + (["in/s"] if sampled else []) + ["min.isr", "notes"]
    for col in pcols:
        tt.add_column(col, justify="right" if col in ("partition", "leader", "size", "in/s", "min.isr") else "left",
                      overflow="fold", min_width=longest if col == "topic" else None)
    for t in topo.topics:
        min_isr = t.configs.get("min.insync.replicas", "-")
        throttled = [k for k in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
                     if t.configs.get(k)]
        for p in t.partitions:
            notes = []
            if p.offline:
                notes.append("[bold red]offline[/bold red]")
            elif len(p.isr) < len(p.replicas):
                notes.append("[yellow]under-replicated[/yellow]")
            if not p.offline and p.leader != p.preferred_leader:
                notes.append("not preferred")
            if p.offline_replicas:
                notes.append(f"[red]log dir failed[/red] on {_ids(p.offline_replicas)}")
            if p.reassigning:
                notes.append(f"reassigning +{_ids(p.adding_replicas)} -{_ids(p.removing_replicas)}")
            if throttled:
                notes.append("throttled")
            cells = [escape(t.name), str(p.partition), _ids(p.replicas), _ids(p.isr),
                     str(p.leader) if p.leader is not None else "-", human_bytes(p.size_bytes)]
            if sampled:
                cells.append(human_bytes(int(p.bytes_in_per_s)) + "/s" if p.bytes_in_per_s is not None else "-")
            tt.add_row(*cells, str(min_isr), "; ".join(notes))
    con.print(tt)
    reassigning = [p for p in topo.partitions() if p.reassigning]
    con.print(f"{len(topo.topics)} topics, {sum(len(t.partitions) for t in topo.topics)} partitions, "
              f"{len(reassigning)} reassignments in progress")
    for n in topo.notes:
        con.print(f"[yellow]note:[/yellow] {escape(n)}")
    if sampled:
        for n in topo.load_sample.notes:
            con.print(f"load sample: {escape(n)}")


def render_quorum(con: Console, q: Quorum) -> None:
    """The KRaft metadata quorum as ``kafka-metadata-quorum.sh describe --replication`` shows it:
    each voter and observer, its log end offset, lag and how long ago it was caught up."""
    con.print(f"KRaft metadata quorum: leader {q.leader if q.leader >= 0 else 'NONE'}, epoch {q.epoch}, "
              f"high watermark {q.high_watermark}, {len(q.voters)} voters (majority {q.majority})")
    qt = Table()
    for col in ("id", "role", "log end offset", "lag", "caught up"):
        qt.add_column(col, justify="left" if col == "role" else "right")
    for role, reps in (("voter", q.voters), ("observer", q.observers)):
        for r in reps:
            late = q.behind_s(r)
            behind = "-" if late is None else "now" if late < 1 else f"{late:.0f} s ago"
            if q.silent(r):
                behind = f"[yellow]not in epoch {q.epoch}[/yellow]" if role == "voter" else f"not in epoch {q.epoch}"
            name = "[bold]leader[/bold]" if r.id == q.leader else role
            if role == "voter" and late is not None and late > QUORUM_BEHIND_S:
                behind = f"[yellow]{behind}[/yellow]"
            lag = q.lag(r)
            qt.add_row(str(r.id), name, str(r.log_end_offset) if r.log_end_offset >= 0 else "-",
                       "-" if lag is None else str(lag), behind)
    con.print(qt)


def render_health(con: Console, rep: HealthReport, topo: Topology, fail_on: str) -> None:
    status = "[bold green]HEALTHY[/bold green]" if rep.healthy(fail_on) else "[bold red]UNHEALTHY[/bold red]"
    con.print(
        f"{status}  {rep.partitions} partitions, {rep.brokers_alive} brokers alive, "
        f"{rep.brokers_down} down, {rep.racks} racks"
    )
    if rep.findings:
        t = Table()
        for col in ("severity", "check", "subject", "detail"):
            t.add_column(col, overflow="fold")
        shown = 0
        for f in rep.findings:
            if shown >= 500:
                break
            t.add_row(f"[{_SEV_STYLE[f.severity]}]{f.severity}[/]", f.check, escape(f.subject), escape(f.message))
            shown += 1
        con.print(t)
        if len(rep.findings) > shown:
            con.print(f"... {len(rep.findings) - shown} more (use --output json for all)")
        con.print("summary: " + ", ".join(f"{k}={v}" for k, v in rep.summary().items()))
    for n in topo.notes:
        con.print(f"[yellow]note:[/yellow] {escape(n)}")


