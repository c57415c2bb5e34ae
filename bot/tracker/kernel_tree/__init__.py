"""Access to local kernel git trees (GitPython): commit resolution, MAINTAINERS
lookup and detection of fix commits.

Everything here is meant to work on real kernel trees (1M+ commits, bare
mirrors included) and on untrusted input taken from mail:

* commit ids are validated as 6..40 hex digits *before* git is touched; nothing
  from mail is ever handed to git as an option or a revision expression.  Only
  full shas computed by git itself, or validated hex prefixes in a
  ``--disambiguate=<hex>``/``--contains=<hex>`` form, reach the command line;
* lookups use ``rev-parse --disambiguate``, the persistent ``cat-file`` process
  of GitPython's object database and ``merge-base --is-ancestor``; nothing
  iterates over the history to resolve an id;
* results are cached.  Immutable facts (subject, author, touched files, a
  parsed MAINTAINERS blob) are cached by object id; facts that change when a
  tree is fetched (containment, first release tag, which objects exist) are
  dropped automatically when a tree's tip or its tag refs change, or
  explicitly with :meth:`KernelTrees.refresh`.

Public API: :class:`TreeSpec`, :class:`KernelTrees`, :class:`CommitInfo`,
:class:`Resolution`/:class:`ResolveStatus`, :class:`Maintainers`,
:class:`Section`, :class:`PathMatch`, :class:`SubsystemMatch`,
:class:`FixRecord`, :class:`FixScan` and the helpers
:func:`normalize_commit_id`, :func:`release_tag_key`,
:func:`parse_trailers` (Message-IDs in trailers: :class:`bot.msgid.MessageId`).
"""

from bot.tracker.kernel_tree.maintainers import Maintainers
from bot.tracker.kernel_tree.model import (CommitInfo, FixRecord, FixScan, PathMatch, Resolution, ResolveStatus,
                                           Section, SubsystemMatch, Trailer, TreeSpec, normalize_commit_id,
                                           parse_trailers, release_tag_key)
from bot.tracker.kernel_tree.trees import KernelTrees

__all__ = [
    "TreeSpec",
    "KernelTrees",
    "CommitInfo",
    "Resolution",
    "ResolveStatus",
    "Maintainers",
    "Section",
    "PathMatch",
    "SubsystemMatch",
    "FixRecord",
    "FixScan",
    "Trailer",
    "normalize_commit_id",
    "release_tag_key",
    "parse_trailers",
]
