"""
The tables of the GRPO design-choice studies (docs/guide/grpo_studies.md): the steps from plain GRPO to each zoo
entry, the variants against the step they differ least from, reruns on a second machine, points of the learning
curves, and variants against the zoo entry. Which cells each shows is in ``benchmarks/aggregate.yml``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.dataset import (
    COUNT_ABOVE,
    SPEC,
    Data,
    budget_label,
    change,
    display,
    flatten,
    hyperparams_of,
    markdown,
    provenance,
    seed_list,
)

Spec = dict[str, Any]
#: The steps from plain GRPO to each zoo entry: env -> [(name, what the step adds)].
LADDERS: dict[str, list[tuple[str, str]]] = {env: [(n, w) for n, w in steps] for env, steps in SPEC["ladders"].items()}
#: Identical configurations run on two machines: (env, first run, rerun).
RERUNS: list[tuple[str, str, str]] = [(env, a, b) for env, a, b in SPEC["reruns"]]


def _score(env: str, x: np.ndarray) -> str:
    text = f"{x.mean():.1f} ± {x.std():.1f}" if len(x) > 1 else f"{x[0]:.1f}"
    if env in COUNT_ABOVE:
        text += f", {_above(env, x)} of {len(x)} above {COUNT_ABOVE[env]:g}, median {np.median(x):.1f}"
    return text


def _above(env: str, x: np.ndarray) -> int:
    return int((x >= COUNT_ABOVE[env]).sum())


def _tag(name: str) -> str:
    return name.split(":", 1)[1]


def ladder(data: Data, spec: Spec) -> str:
    """Each step toward the zoo entry against the step before it, on the seeds both ran."""
    env = spec["env"]
    rows, used, previous = [], [], None
    for name, what in LADDERS[env]:
        finals = data.finals(env, name)
        used += data.cells_of(env, name)
        x = np.array(list(finals.values()))
        cols = [
            f"`{name}`",
            what,
            change(hyperparams_of(data, env, previous), hyperparams_of(data, env, name)) if previous else "",
        ]
        cols += [f"{len(x)}: {seed_list(finals)}", _score(env, x)]
        if previous is not None:
            before = data.finals(env, previous)
            common = sorted(set(finals) & set(before))
            if common:
                a = np.array([finals[s] for s in common])
                b = np.array([before[s] for s in common])
                if env in COUNT_ABOVE:
                    cols.append(f"{_above(env, a)} vs {_above(env, b)} of {len(common)} above {COUNT_ABOVE[env]:g}")
                else:
                    cols.append(f"{a.mean() - b.mean():+.1f} over {len(common)} seed{'s' if len(common) > 1 else ''}")
            else:
                cols.append("no common seeds")
        else:
            cols.append("")
        rows.append(cols)
        previous = name
    header = ["cells", "step", "change from the step before", "seeds", "final eval", "against the step before, same seeds"]
    lines = markdown(header, rows)
    lines += ["", f"{provenance(used)}."]
    return "\n".join(lines)


def variants_of(data: Data, env: str, min_seeds: int, budget: int) -> list[str]:
    """The ``grpo:`` variants on ``env`` at ``budget`` with ``min_seeds`` seeds or more, less the ladder and reruns."""
    steps = {n for n, _ in LADDERS.get(env, [])}
    reruns = {n for e, a, b in RERUNS if e == env for n in (a, b)}
    return sorted(
        name
        for (e, name), cells in data.by.items()
        if e == env
        and name.startswith("grpo:")
        and name not in steps | reruns
        and "@" not in name
        and len(cells) >= min_seeds
        and next(iter(cells.values()))["budget"] == budget
    )


def variants(data: Data, spec: Spec) -> str:
    """Every variant with at least ``min_seeds`` seeds against the ladder step it differs least from, on common seeds."""
    env = spec["env"]
    position = {n: i for i, (n, _) in enumerate(LADDERS[env])}
    for e, first, rerun in RERUNS:  # a rerun stands where its configuration stands
        if e == env:
            position[rerun] = position.get(first, -1)
    rows, used = [], []
    for name in variants_of(data, env, spec["min_seeds"], spec["budget"]):
        hp = flatten(hyperparams_of(data, env, name))
        cpus = {s: c["cpu"] for s, c in data.by[(env, name)].items()}

        def distance(base: str, hp: dict = hp, cpus: dict = cpus) -> tuple[int, int, int]:
            other = flatten(hyperparams_of(data, env, base))
            same_machine = sum(1 for s, c in data.by[(env, base)].items() if s in cpus and c["cpu"] == cpus[s])
            return (sum(hp.get(k) != other.get(k) for k in set(hp) | set(other)), -position[base], -same_machine)

        # the configuration it differs least from (the later step on a tie); of two runs of one configuration, the one
        # with more seeds on the variant's machine
        base = min(position, key=distance)
        finals, before = data.finals(env, name), data.finals(env, base)
        common = sorted(set(finals) & set(before))
        used += data.cells_of(env, name)
        x = np.array(list(finals.values()))
        a = np.array([finals[s] for s in common])
        b = np.array([before[s] for s in common])
        if env in COUNT_ABOVE:
            against = f"{_above(env, a)} vs {_above(env, b)} of {len(common)}"
            thr = COUNT_ABOVE[env]
            key = (a >= thr).mean() - (b >= thr).mean() if common else -np.inf
        else:
            against = f"{a.mean() - b.mean():+.1f} over {len(common)}" if common else "-"
            key = a.mean() - b.mean() if common else -np.inf
        cols = [f"`{_tag(name)}`", f"`{_tag(base)}`", change(hyperparams_of(data, env, base), hyperparams_of(data, env, name))]
        rows.append((key, [*cols, str(len(x)), _score(env, x), against]))
    rows.sort(key=lambda r: -r[0])
    if env in COUNT_ABOVE:
        what = f"above {COUNT_ABOVE[env]:g}, variant vs base, same seeds"
    else:
        what = "mean difference to the base, same seeds"
    lines = markdown(["variant", "base", "change from the base", "seeds", "final eval", what], [r for _, r in rows])
    lines += ["", f"{provenance(used)}."]
    return "\n".join(lines)


def reruns(data: Data, spec: Spec) -> str:
    """Identical configurations run on two machines, on the seeds both ran."""
    rows, used = [], []
    for env, a, b in RERUNS:
        common, x, y, cells_a, cells_b = data.paired(env, a, b)
        used += cells_a + cells_b
        same = int(np.sum(np.isclose(x, y, rtol=0, atol=1e-6)))
        ca = {c["cpu"] or "not recorded" for c in cells_a}
        cb = {c["cpu"] or "not recorded" for c in cells_b}
        rows.append(
            [
                env,
                f"`{_tag(a)}` ({', '.join(sorted(ca))})",
                f"`{_tag(b)}` ({', '.join(sorted(cb))})",
                seed_list(common),
                _score(env, x),
                _score(env, y),
                f"{same} of {len(common)}",
                f"{np.abs(x - y).mean():.1f}",
            ]
        )
    header = [
        "env",
        "first run (CPU)",
        "rerun (CPU)",
        "seeds",
        "first run",
        "rerun",
        "identical finals",
        "mean abs. difference",
    ]
    return "\n".join([*markdown(header, rows), "", f"{provenance(used)}."])


def curve_points(data: Data, spec: Spec) -> str:
    """Mean evaluation over the seeds at a few points of the run (the first evaluation at or after each)."""
    env = spec["env"]
    rows, used = [], []
    for name in spec["cells"]:
        cells = data.cells_of(env, name, spec["seeds"])
        used += cells
        cols = [f"`{_tag(name)}`" if ":" in name else display(name)]
        for t in spec["steps"]:
            values = []
            for c in cells:
                curve = data.curves[(name, env, c["seed"])]
                values.append(curve[np.searchsorted(curve[:, 0], t), 1])
            cols.append(f"{np.mean(values):.0f}")
        finals = np.array([c["final_eval"] for c in cells])
        cols.append(f"{finals.mean():.1f} ± {finals.std():.1f}")
        rows.append(cols)
    header = ["cells", *(budget_label(t) for t in spec["steps"]), spec["final"]]
    return "\n".join([*markdown(header, rows), "", f"{provenance(used)}."])


def against_entry(data: Data, spec: Spec) -> str:
    """Each variant against a base (the zoo entry) on the seeds both ran."""
    rows, used = [], []
    for env, name, base in spec["rows"]:
        finals, before = data.finals(env, name), data.finals(env, base)
        common = sorted(set(finals) & set(before))
        used += data.cells_of(env, name)
        x = np.array(list(finals.values()))
        diff = np.mean([finals[s] - before[s] for s in common])
        rows.append(
            [
                env,
                f"`{_tag(name)}`",
                "the `default` entry: GRPO's constructor defaults when it ran (`group_zscore` then)"
                if name.endswith(":default")
                else change(hyperparams_of(data, env, base), hyperparams_of(data, env, name)),
                f"{budget_label(next(iter(data.by[(env, name)].values()))['budget'])}",
                f"{len(x)}: {seed_list(finals)}",
                f"{x.mean():.1f} ± {x.std():.1f}",
                f"{diff:+.1f}",
            ]
        )
    header = ["env", "variant", "change from the zoo entry", "budget", "seeds", "final eval", "minus the entry, same seeds"]
    return "\n".join([*markdown(header, rows), "", f"{provenance(used)}."])
