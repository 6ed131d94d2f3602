"""The base of every error the project raises on purpose, so that a caller catches them all in
one clause (`except RepkvTuneError`). Each subclass also keeps the builtin base it always had
(ValueError for bad input, RuntimeError for a failing device or toolchain)."""

from __future__ import annotations


class RepkvTuneError(Exception):
    """An error of repkv-tune: bad input, a bad file, a kernel that failed, a busy GPU."""
