"""The SoC timeline as a picture (matplotlib): ``vdsp trace --png``.

Drawn from a merged trace (``vdsp_board.observability.tracefmt``): one row per core with a bar per
task it ran, coloured by client, and its lifecycle instants (crash, watchdog: red; boot,
recovery: green; stop: grey); the relay's queue depth and each core's tasks in flight; one
row per client with its tasks from submit to completion (or from enqueue to reply when the
SDK did not stamp them), drawn translucent so that overlapping tasks show darker.
"""
from __future__ import annotations

import collections
from pathlib import Path

LIFECYCLE_COLOURS = {"crash": "red", "watchdog": "red", "boot_failed": "red", "boot": "green",
                     "recovery": "green", "stop": "grey"}


def _names(events: list) -> tuple[dict, dict]:
    procs, threads = {}, {}
    for ev in events:
        if ev.get("ph") == "M" and ev.get("name") == "process_name":
            procs[ev["pid"]] = ev["args"]["name"]
        elif ev.get("ph") == "M" and ev.get("name") == "thread_name":
            threads[(ev["pid"], ev["tid"])] = ev["args"]["name"]
    return procs, threads


def timeline(doc: dict) -> dict:
    """The picture's data: core rows, counters, client rows, instants (times in ms)."""
    events = doc.get("traceEvents", [])
    procs, _ = _names(events)
    cores = collections.defaultdict(list)       # core -> [(start, dur, client_pid, name)]
    clients = collections.defaultdict(list)     # client pid -> [(start, dur)]
    spans: dict = collections.defaultdict(dict)  # task -> stage -> ts
    instants = collections.defaultdict(list)    # core -> [(ts, what)]
    queue, inflight = [], collections.defaultdict(list)
    core_of_pid = {}
    for pid, name in procs.items():
        if name.startswith("vdsp") or "core pid" in name:
            core_of_pid[pid] = name.split(" ")[0]
    for ev in events:
        ph, args = ev.get("ph"), ev.get("args") or {}
        if ph == "X" and ev.get("cat") == "firmware":
            core = args.get("core") or core_of_pid.get(ev["pid"], str(ev["pid"]))
            cores[core].append((ev["ts"] / 1e3, ev["dur"] / 1e3, args.get("client_pid"), ev["name"]))
        elif ph == "X" and args.get("stage") in ("submit", "complete", "enqueue", "reply", "fail"):
            spans[args["task"]][args["stage"]] = ev["ts"] / 1e3
            spans[args["task"]]["client"] = args.get("client_pid")
        elif ph == "C" and ev["name"] == "queue depth":
            queue.append((ev["ts"] / 1e3, args.get("queued", 0)))
        elif ph == "C" and ev["name"] == "in flight":
            for core, n in args.items():
                inflight[core].append((ev["ts"] / 1e3, n))
        elif ph == "i" and ev.get("cat") == "lifecycle":
            instants[args.get("core") or core_of_pid.get(ev["pid"], "?")].append((ev["ts"] / 1e3, ev["name"]))
    for task, st in spans.items():
        start = st.get("submit", st.get("enqueue"))
        end = st.get("complete", st.get("reply", st.get("fail")))
        if start is not None and end is not None and st.get("client") is not None:
            clients[st["client"]].append((start, max(end - start, 0.001)))
    return {"cores": dict(cores), "clients": dict(clients), "queue": queue, "inflight": dict(inflight),
            "instants": dict(instants)}


def render(doc: dict, path, title: str = "") -> Path:
    """Write the timeline of ``doc`` to ``path`` (PNG); returns the path."""
    import matplotlib.pyplot as plt
    fig = figure(doc, title)
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def figure(doc: dict, title: str = ""):
    """The timeline of ``doc`` as a matplotlib figure (the caller closes it)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = timeline(doc)
    core_names = sorted(set(data["cores"]) | set(data["instants"]) | set(data["inflight"]))
    client_pids = sorted(data["clients"])
    palette = plt.get_cmap("tab10")
    colour = {pid: palette(i % 10) for i, pid in enumerate(client_pids)}
    fig, (ax_core, ax_q, ax_cl) = plt.subplots(
        3, 1, sharex=True, figsize=(14, 3 + 0.5 * (len(core_names) + len(client_pids))),
        gridspec_kw={"height_ratios": [max(1, len(core_names)), 1.4, max(1, len(client_pids) * 0.8)]})
    for row, core in enumerate(core_names):
        bars = data["cores"].get(core, [])
        by_client = collections.defaultdict(list)
        for start, dur, client, _ in bars:
            by_client[client].append((start, max(dur, 0.002)))
        for client, segs in by_client.items():
            ax_core.broken_barh(segs, (row - 0.4, 0.8), facecolors=colour.get(client, "0.5"), linewidth=0)
        for ts, what in data["instants"].get(core, []):
            ax_core.axvline(ts, ymin=0, ymax=1, color=LIFECYCLE_COLOURS.get(what, "black"), lw=1.2, alpha=0.8)
            ax_core.annotate(what, (ts, row + 0.42), fontsize=7, color=LIFECYCLE_COLOURS.get(what, "black"))
        busy = sum(d for _, d, _, _ in bars)
        # x in axes fraction (just right of the plot), y in data: the row's own y, however the axis runs
        ax_core.text(1.002, row, f"{len(bars)} tasks\n{busy:.0f} ms busy",
                     transform=ax_core.get_yaxis_transform(), fontsize=7, va="center")
    ax_core.set_yticks(range(len(core_names)), core_names)
    ax_core.set_ylim(-0.6, len(core_names) - 0.4)
    ax_core.invert_yaxis()
    ax_core.set_title(title or "vdsp SoC timeline: tasks on each DSP core (colour = client)", fontsize=10)
    if data["queue"]:
        t, n = zip(*data["queue"])
        ax_q.step(t, n, where="post", label="relay queue depth", color="black", lw=1)
    for i, core in enumerate(sorted(data["inflight"])):
        t, n = zip(*data["inflight"][core])
        ax_q.step(t, n, where="post", label=f"in flight {core}", lw=1, alpha=0.8)
    ax_q.set_ylabel("tasks")
    if data["queue"] or data["inflight"]:
        ax_q.legend(fontsize=7, loc="upper right")
    for row, pid in enumerate(client_pids):
        ax_cl.broken_barh(data["clients"][pid], (row - 0.4, 0.8), facecolors=colour[pid], alpha=0.12, linewidth=0)
    ax_cl.set_yticks(range(len(client_pids)), [f"client {pid}" for pid in client_pids])
    ax_cl.set_ylim(-0.6, len(client_pids) - 0.4)
    ax_cl.invert_yaxis()
    ax_cl.set_xlabel("ms since the first event of the trace")
    ax_cl.set_title("each client's tasks, submit to completion (darker = more in flight)", fontsize=8)
    fig.tight_layout()
    return fig
