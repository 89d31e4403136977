"""Draw the benchmark's PNG plots from its JSON results (needs matplotlib).

    python bench/plots.py --results bench/results --name small

Writes <name>-quality.png (recall at equal context budgets, per system and
question kind), <name>-latency.png (retrieval-only p50/p95, log scale) and,
when scale-<name>.json exists, scale-<name>.png (SQL latency by tree size).
Runs in either environment: bench/run.py uses the project's if it has
matplotlib, else the peers' (bench/requirements-peers.txt includes it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

BUDGETS = ("2000", "4000")


def short(name: str) -> str:
    for old, new in (("hrag-pg ", "hrag "), ("LlamaIndex AutoMergingRetriever", "LlamaIndex AutoMerging"),
                     ("LangChain ParentDocumentRetriever", "LangChain ParentDoc"),
                     (" (hrag search_leaves, floor)", ""), ("threshold ", "thr "), (" children", " ch"),
                     (" parents", " par"), ("pure vector, ", ""), ("vector: ", "vector: "), (", no floor", "")):
        name = name.replace(old, new)
    return name


def quality(report: dict, out: Path) -> None:
    systems = report["systems"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.6), sharey=True)
    width = 0.8 / len(systems)
    colors = plt.get_cmap("tab20").colors
    for ax, kind in zip(axes, ("narrow", "broad"), strict=True):
        for i, s in enumerate(systems):
            values = [s["summary"][kind]["budget_recall"][b] for b in BUDGETS] + [s["summary"][kind]["recall"]]
            xs = [j + i * width for j in range(len(values))]
            ax.bar(xs, values, width, label=short(s["system"]) if kind == "narrow" else None,
                   color=colors[i % len(colors)])
        ax.set_xticks([j + width * (len(systems) - 1) / 2 for j in range(3)],
                      ["@2,000 tokens", "@4,000 tokens", "whole context"])
        ax.set_title(f"{kind} questions: snippet recall")
        ax.set_ylim(0, 1)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("recall")
    fig.legend(fontsize=7, loc="lower center", ncol=3, frameon=False)
    fig.suptitle(f"Quality ({report['config']['files']} files, {report['config']['questions']} questions)")
    fig.tight_layout(rect=(0, 0.18, 1, 1))
    fig.savefig(out, dpi=110)
    plt.close(fig)


def latency(report: dict, out: Path) -> None:
    systems = report["systems"]
    fig, ax = plt.subplots(figsize=(11, 5))
    names = [short(s["system"]) for s in systems]
    p50 = [s["retrieval_ms"]["p50"] for s in systems]
    p95 = [s["retrieval_ms"]["p95"] for s in systems]
    ys = range(len(systems))
    ax.barh([y + 0.2 for y in ys], p50, 0.4, label="p50")
    ax.barh([y - 0.2 for y in ys], p95, 0.4, label="p95")
    ax.set_yticks(list(ys), names, fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("retrieval-only latency, ms (log scale; query vector precomputed)")
    ax.legend()
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def scale(report: dict, out: Path) -> None:
    sizes = report["sizes"]
    leaves = [s["leaves"] for s in sizes]
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for i, label in enumerate(sizes[0]["latency_ms"]):
        color = f"C{i}"
        ax.plot(leaves, [s["latency_ms"][label]["p50"] for s in sizes], marker="o", color=color,
                label=f"{label} p50")
        ax.plot(leaves, [s["latency_ms"][label]["p95"] for s in sizes], marker="x", linestyle="--", color=color,
                label=f"{label} p95")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("leaves (synthetic, D=384)")
    ax.set_ylabel("latency, ms (one SQL call)")
    ax.set_title("hrag SQL functions by corpus size")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--name", default="small")
    args = parser.parse_args(argv)
    main_json = args.results / f"{args.name}.json"
    written = []
    if main_json.exists():
        report = json.loads(main_json.read_text(encoding="utf-8"))
        quality(report, args.results / f"{args.name}-quality.png")
        latency(report, args.results / f"{args.name}-latency.png")
        written += [f"{args.name}-quality.png", f"{args.name}-latency.png"]
    scale_json = args.results / f"scale-{args.name}.json"
    if scale_json.exists():
        scale(json.loads(scale_json.read_text(encoding="utf-8")), args.results / f"scale-{args.name}.png")
        written.append(f"scale-{args.name}.png")
    print(f"plots written: {', '.join(written) or 'none (no results found)'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
