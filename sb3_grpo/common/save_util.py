"""Crash-safe saving and clear errors on unreadable files, for all three algorithms."""

from __future__ import annotations

import io
import os
import pathlib
import zipfile
from typing import Any

__all__ = ["SafeSaveMixin"]


class SafeSaveMixin:
    """
    ``save`` writes to a temporary file next to the target and renames it into place only once complete, so a
    save interrupted half-way (crash, KeyboardInterrupt, full disk) never destroys the previous file.
    ``load`` turns a truncated or foreign file into a ``ValueError`` that says what the file is not.
    """

    def save(self, path: str | pathlib.Path | io.BufferedIOBase, exclude: Any = None, include: Any = None) -> None:
        if isinstance(path, io.BufferedIOBase):
            super().save(path, exclude=exclude, include=include)  # type: ignore[misc]
            return
        final = pathlib.Path(path)
        if final.suffix == "":
            final = final.with_suffix(".zip")  # as SB3 does
        final.parent.mkdir(parents=True, exist_ok=True)
        partial = final.with_name(f".{final.name}.partial-{os.getpid()}.zip")
        try:
            super().save(partial, exclude=exclude, include=include)  # type: ignore[misc]
            os.replace(partial, final)
        finally:
            if partial.exists():
                partial.unlink()

    @classmethod
    def load(cls, path: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().load(path, *args, **kwargs)  # type: ignore[misc]
        except ValueError as exc:
            if "zip" not in str(exc):
                raise  # e.g. spaces that do not match: SB3's own message is clear
            raise ValueError(
                f"Cannot load {path!s} as a {cls.__name__} model: the file is truncated or is not a model saved by "
                f"model.save() ({exc})."
            ) from exc
        except (zipfile.BadZipFile, EOFError, AssertionError) as exc:
            raise ValueError(
                f"Cannot load {path!s} as a {cls.__name__} model: the file is truncated or is not a model saved by "
                f"model.save() ({exc}). Load an intact checkpoint instead (an interrupted save leaves the previous file "
                "in place)."
            ) from exc
        except KeyError as exc:
            raise ValueError(
                f"Cannot load {path!s} as a {cls.__name__} model: the archive lacks {exc}, so it was not written by "
                "model.save() of an SB3 algorithm."
            ) from exc
