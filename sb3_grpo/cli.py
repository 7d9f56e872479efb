"""
``sb3-grpo``: sb3_grpo's own command line (``python -m sb3_grpo`` is the same).

::

    sb3-grpo plugins           # the active plugins, where each comes from, and the names each hook registered
    sb3-grpo plugins --json    # the same as JSON (what sb3_grpo.list_plugins() returns)
    sb3-grpo plugins --strict  # exit status 1 on a plugin warning: a plugin that failed, registers nothing or
                               # claims a name another plugin claims, SB3_GRPO_LOAD_PLUGINS naming a missing one
    sb3-grpo --version

A plugin that failed to load, or a name two plugins claim, is listed with a mark (``FAILED``, ``CLASH``); the listing
itself succeeds (exit status 0) unless ``--strict`` is given.

Training and tuning from the command line is ``sb3-grpo-zoo`` (rl_zoo3 with sb3_grpo's algorithms).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Sequence

__all__ = ["main"]


def _print_plugins(as_json: bool, strict: bool) -> int:
    from sb3_grpo.plugins import PluginError, PluginWarning, list_plugins

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PluginWarning)
        try:
            plugins = list_plugins()
        except PluginError as exc:
            print(f"sb3-grpo: error: {exc}", file=sys.stderr)
            return 1
    plugin_warnings = [w for w in caught if issubclass(w.category, PluginWarning)]
    for caught_warning in caught:
        if caught_warning in plugin_warnings:
            print(f"sb3-grpo: warning: {caught_warning.message}", file=sys.stderr)
        else:
            warnings.showwarning(
                caught_warning.message, caught_warning.category, caught_warning.filename, caught_warning.lineno
            )
    if as_json:
        print(json.dumps(plugins, indent=2))
    else:
        for plugin in plugins:
            print(f"{plugin['name']}  ({plugin['source']}){'  FAILED' if plugin['failed'] else ''}")
            if "load" in plugin["failed"]:
                print(f"    FAILED to load, nothing of it is loaded: {plugin['failed']['load']}")
            elif not plugin["hooks"]:
                print("    implements no hook: registers nothing")
            for hook, names in plugin["hooks"].items():
                if hook in plugin["failed"]:
                    print(f"    {hook}: FAILED, registers nothing: {plugin['failed'][hook]}")
                    continue
                clashes = plugin["clashes"].get(hook, {})
                shown = [
                    f"{name} [CLASH with {', '.join(map(repr, clashes[name]))}: unusable]" if name in clashes else name
                    for name in names
                ]
                print(f"    {hook}: {', '.join(shown) or '(nothing)'}")
    troubled = any(plugin["failed"] or plugin["clashes"] for plugin in plugins)
    return 1 if strict and (plugin_warnings or troubled) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``) and return the exit status."""
    from sb3_grpo import __version__

    parser = argparse.ArgumentParser(prog="sb3-grpo", description="sb3_grpo's command line.")
    parser.add_argument("--version", action="version", version=f"sb3-grpo {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    plugins = commands.add_parser(
        "plugins", help="list the active plugins and what each registered", description="List the active plugins."
    )
    plugins.add_argument("--json", action="store_true", help="print JSON (the value of sb3_grpo.list_plugins())")
    plugins.add_argument(
        "--strict",
        action="store_true",
        help="exit with status 1 on a plugin warning (a plugin that failed to load or registers nothing, a name two "
        "plugins claim, a missing plugin named in SB3_GRPO_LOAD_PLUGINS): for CI",
    )
    scaffold = commands.add_parser(
        "new-plugin",
        help="write a new plugin distribution (an estimator and a reward function, tests, entry point) to edit",
        description="Write the plugin distribution sb3-grpo-NAME: pyproject.toml with the sb3_grpo entry point, a "
        "package registering an advantage estimator and a reward function (names prefixed NAME_), tests and a README. "
        'Then: pip install -e "./sb3-grpo-NAME[test]" && pytest sb3-grpo-NAME',
    )
    scaffold.add_argument("name", help="the plugin's name: lower-case letters, digits and underscores")
    scaffold.add_argument("--dir", default=".", help="where to write the distribution's folder (default: here)")
    args = parser.parse_args(argv)
    if args.command == "plugins":
        return _print_plugins(args.json, args.strict)
    if args.command == "new-plugin":
        from sb3_grpo.scaffold import new_plugin

        try:
            root = new_plugin(args.name, args.dir)
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
        print(f'wrote {root}: pip install -e "{root}[test]" && pytest {root}')
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
