"""Tests for bot.tracker.kernel_tree on a small synthetic kernel-like repository."""

from __future__ import annotations

import hashlib
import itertools
import subprocess
from datetime import datetime, timedelta, timezone
from io import BytesIO
from pathlib import Path
from types import SimpleNamespace

import git
import pytest
from git import Actor, Repo
from gitdb.base import IStream

from bot.msgid import MessageId
from bot.tracker.kernel_tree import (
    KernelTrees,
    Maintainers,
    ResolveStatus,
    TreeSpec,
    normalize_commit_id,
    parse_trailers,
    release_tag_key,
)

MAINTAINERS_TEXT = """\
List of maintainers and how to submit kernel changes
====================================================

Descriptions of section entries and preferred order
---------------------------------------------------

	M: *Mail* patches to: FullName <address@domain>
	L: *Mailing list* that is relevant to this area
	F: *Files* and directories wildcard patterns.
	   A trailing slash includes all files and subdirectory files.

Maintainers List
----------------

.. note:: When reading this list, please look for the most precise areas
          first.

CONTROL GROUP - MEMORY RESOURCE CONTROLLER (MEMCG)
M:	Johannes Weiner <hannes@cmpxchg.org>
L:	cgroups@vger.kernel.org
L:	linux-mm@kvack.org
S:	Maintained
F:	mm/memcontrol.c

FILESYSTEMS (VFS and infrastructure)
M:	Alexander Viro <viro@zeniv.linux.org.uk>
L:	linux-fsdevel@vger.kernel.org
S:	Maintained
F:	fs/*
F:	include/linux/fs.h

INTEL ETHERNET DRIVERS
M:	Tony Nguyen <anthony.l.nguyen@intel.com>
L:	intel-wired-lan@lists.osuosl.org (moderated for non-subscribers)
S:	Maintained
F:	drivers/net/ethernet/intel

MEMORY MANAGEMENT
M:	Andrew Morton <akpm@linux-foundation.org>
L:	linux-mm@kvack.org
S:	Maintained
W:	http://www.linux-mm.org
T:	git git://git.kernel.org/pub/scm/linux/kernel/git/akpm/mm
F:	include/linux/gfp.h
F:	include/linux/mm.h
F:	mm/

ROCKCHIP SUPPORT
M:	Heiko Stuebner <heiko@sntech.de>
L:	linux-rockchip@lists.infradead.org (moderated for non-subscribers)
S:	Maintained
N:	rockchip

SCHEDULER
M:	Ingo Molnar <mingo@redhat.com>
M:	Peter Zijlstra <peterz@infradead.org>
R:	Valentin Schneider <vschneid@redhat.com>
L:	linux-kernel@vger.kernel.org
S:	Maintained
T:	git git://git.kernel.org/pub/scm/linux/kernel/git/tip/tip.git sched/core
F:	include/linux/sched.h
F:	kernel/sched/
X:	kernel/sched/ext.c

XFS FILESYSTEM
M:	Carlos Maiolino <cem@kernel.org>
L:	linux-xfs@vger.kernel.org
S:	Supported
T:	git git://git.kernel.org/pub/scm/fs/xfs/xfs-linux.git
F:	Documentation/filesystems/xfs/*
F:	fs/xfs/
F:	include/uapi/linux/dqblk_xfs.h

THE REST
M:	Linus Torvalds <torvalds@linux-foundation.org>
L:	linux-kernel@vger.kernel.org
S:	Buried alive in reporters
T:	git git://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git
F:	*
F:	*/
"""

SCHED_EXT_SECTION = """
SCHEDULER - SCHED_EXT
M:	Tejun Heo <tj@kernel.org>
L:	linux-kernel@vger.kernel.org
S:	Maintained
F:	kernel/sched/ext.c

"""

BASE_FILES = {
    "MAINTAINERS": MAINTAINERS_TEXT,
    "Makefile": "VERSION = 6\nPATCHLEVEL = 7\n",
    "README": "Linux kernel\n",
    "mm/memory.c": "// memory\n",
    "mm/slub.c": "// slub\n",
    "mm/memcontrol.c": "// memcg\n",
    "include/linux/mm.h": "// mm.h\n",
    "fs/namei.c": "// namei\n",
    "fs/xfs/xfs_inode.c": "// xfs inode\n",
    "kernel/sched/core.c": "// sched core\n",
    "kernel/sched/fair.c": "// cfs\n",
    "kernel/sched/ext.c": "// scx\n",
    "drivers/soc/rockchip/pm.c": "// rk\n",
}

ALICE = Actor("Alice Developer", "alice@example.com")
BOB = Actor("Bob Fixer", "bob@example.org")
T0 = 1704106800  # 2024-01-01T11:00:00Z
_clock = itertools.count()


def commit(repo: Repo, files: dict[str, str], message: str, author: Actor = ALICE, when: int | None = None) -> str:
    root = Path(repo.working_tree_dir)
    for path, content in files.items():
        p = root / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
    repo.index.add(list(files))
    when = T0 + 3600 * next(_clock) if when is None else when
    date = f"{when} +0100"
    c = repo.index.commit(message, author=author, committer=author, author_date=date, commit_date=date)
    return c.hexsha


def new_repo(path: Path) -> Repo:
    repo = Repo.init(path, initial_branch="master")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "Tag Ger")
        cw.set_value("user", "email", "tagger@example.com")
    return repo


def store_object(repo: Repo, kind: bytes, data: bytes) -> str:
    return repo.odb.store(IStream(kind, len(data), BytesIO(data))).hexsha.decode()


def git_sha(kind: bytes, data: bytes) -> str:
    return hashlib.sha1(kind + b" %d\0" % len(data) + data).hexdigest()


def fake_commit(tree: str, n: int) -> bytes:
    return (
        f"tree {tree}\nauthor X <x@example.com> {T0} +0000\n"
        f"committer X <x@example.com> {T0} +0000\n\ncollision {n}\n"
    ).encode()


def find_commit_collision(tree: str) -> tuple[bytes, bytes]:
    """Two commit objects whose ids share their first 6 hex digits."""
    seen: dict[str, bytes] = {}
    for n in itertools.count():
        data = fake_commit(tree, n)
        p = git_sha(b"commit", data)[:6]
        if p in seen:
            return seen[p], data
        seen[p] = data
    raise AssertionError  # pragma: no cover


def find_blob_commit_collision(tree: str) -> tuple[bytes, bytes]:
    """A blob and a commit whose ids share their first 6 hex digits."""
    blobs: dict[str, bytes] = {}
    commits: dict[str, bytes] = {}
    for n in itertools.count(10**6):
        b = b"blob %d\n" % n
        pb = git_sha(b"blob", b)[:6]
        if pb in commits:
            return b, commits[pb]
        blobs[pb] = b
        c = fake_commit(tree, n)
        pc = git_sha(b"commit", c)[:6]
        if pc in blobs:
            return blobs[pc], c
        commits[pc] = c
    raise AssertionError  # pragma: no cover


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    base = tmp_path_factory.mktemp("kernel")
    ns = SimpleNamespace(base=base)
    repo = new_repo(base / "linux")
    ns.c0 = commit(repo, BASE_FILES, "Linux 6.7")
    repo.create_tag("v6.7", ref=ns.c0, message="Linux 6.7")
    ns.c1 = commit(
        repo,
        {"mm/memory.c": "// memory\nint foo;\n", "include/linux/mm.h": "// mm.h\nextern int foo;\n"},
        "mm: introduce foo\n\nAdd the foo counter.\n\nSigned-off-by: Alice Developer <alice@example.com>\n",
        when=T0,
    )
    ns.c2 = commit(repo, {"fs/xfs/xfs_inode.c": "// xfs inode v2\n"}, "xfs: rework inode allocation\n")
    repo.create_tag("v6.8-rc1", ref=ns.c2, message="Linux 6.8-rc1")
    repo.create_tag("xfs-6.8-merge", ref=ns.c2)  # not a release tag
    ns.c3 = commit(
        repo,
        {"kernel/sched/core.c": "// sched core 2\n", "kernel/sched/fair.c": "// cfs 2\n"},
        "sched/fair: tweak wakeup preemption\n",
    )
    ns.c4 = commit(
        repo,
        {"mm/memory.c": "// memory\nint foo = 1;\n"},
        "mm: fix foo regression\n\nFoo must start at one.\n\n"
        f'Fixes: {ns.c1[:12]} ("mm: introduce foo")\n'
        "Reported-by: Rep Orter <reporter@example.net>\n"
        "Closes: https://lore.kernel.org/r/report-1@example.com/\n"
        "Link: https://patch.msgid.link/20240201-fix-foo-v1-1@example.org\n"
        "Signed-off-by: Bob Fixer <bob@example.org>\n",
        author=BOB,
    )
    ns.c5 = commit(
        repo,
        {"Makefile": "VERSION = 6\nPATCHLEVEL = 8\n", "MAINTAINERS": MAINTAINERS_TEXT.replace(
            "\nTHE REST\n", SCHED_EXT_SECTION + "THE REST\n")},
        "Linux 6.8\n",
    )
    repo.create_tag("v6.8", ref=ns.c5, message="Linux 6.8")
    ns.c6 = commit(
        repo,
        {"kernel/sched/core.c": "// sched core 3\n"},
        "sched: fix lost wakeup\n\n"
        "Link: https://lore.kernel.org/linux-kernel/REPORT-2@Example.com/T/#u\n"
        f'Fixes: {ns.c3[:12]} ("sched/fair: tweak wakeup preemption")\n',
    )
    repo.create_tag("v6.9-rc1", ref=ns.c6, message="Linux 6.9-rc1")
    ns.c7 = commit(repo, {"README": "Linux kernel 6.10\n"}, "Linux 6.10-rc1\n")
    repo.create_tag("v6.10-rc1", ref=ns.c7, message="Linux 6.10-rc1")
    ns.c8 = commit(
        repo,
        {"mm/slub.c": "// slub 2\n"},
        "mm/slub: unrelated cleanup\n\n"
        "Link: https://lore.kernel.org/all/unrelated@example.com/\n"
        'Fixes: 0000000000ab ("ancient history")\n',
    )
    ns.mainline = repo

    # linux-next: a clone with extra commits on top
    nxt = Repo.clone_from(str(base / "linux"), str(base / "linux-next"))
    with nxt.config_writer() as cw:
        cw.set_value("user", "name", "Tag Ger")
        cw.set_value("user", "email", "tagger@example.com")
    ns.n1 = commit(
        nxt,
        {"fs/xfs/xfs_inode.c": "// xfs inode v3\n"},
        "xfs: fix inode allocation regression\n\n"
        f'Fixes: {ns.c2[:12]} ("xfs: rework inode allocation")\n'
        "Closes: https://lore.kernel.org/linux-xfs/report-next@example.com/\n",
        author=BOB,
    )
    # a topic branch merged with a merge commit: its files are the first-parent diff
    nxt.git.checkout("-q", "-b", "sched-topic", ns.c8)
    ns.s1 = commit(nxt, {"kernel/sched/fair.c": "// cfs 3\n"}, "sched/fair: topic work\n")
    nxt.git.checkout("-q", "master")
    nxt.git.merge("--no-ff", "-q", "-m", "Merge branch 'sched-topic' into master", "sched-topic")
    ns.m1 = nxt.head.commit.hexsha
    nxt.create_tag("next-20240301", ref=ns.m1)
    ns.next = nxt

    # a bare mirror of mainline
    ns.bare = base / "linux.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(base / "linux"), str(ns.bare)], check=True)

    # objects that only exist in mainline's object database, for ambiguity
    tree = repo.commit(ns.c0).tree.hexsha
    a, b = find_commit_collision(tree)
    ns.amb_data = (a, b)
    ns.amb = sorted([store_object(repo, b"commit", a), store_object(repo, b"commit", b)])
    blob, com = find_blob_commit_collision(tree)
    ns.blob_sha = store_object(repo, b"blob", blob)
    ns.blob_commit = store_object(repo, b"commit", com)

    ns.trees = KernelTrees(
        [
            TreeSpec(base / "linux", "mainline", mainline=True),
            TreeSpec(base / "linux-next", "next", mainline=False),
        ]
    )
    yield ns
    ns.trees.close()


# ---------------------------------------------------------------------------
# pure helpers
# ---------------------------------------------------------------------------


def test_release_tag_ordering() -> None:
    tags = ["v6.10-rc1", "v6.9-rc1", "v6.8", "v6.8-rc10", "v6.8-rc2", "v6.8-rc1", "v6.8.1", "v6.7", "v6.7.12"]
    assert sorted(tags, key=release_tag_key) == [
        "v6.7", "v6.7.12", "v6.8-rc1", "v6.8-rc2", "v6.8-rc10", "v6.8", "v6.8.1", "v6.9-rc1", "v6.10-rc1",
    ]
    assert release_tag_key("v2.6.39-rc1") < release_tag_key("v2.6.39") < release_tag_key("v2.6.39.4")
    assert release_tag_key("v2.6.39.4") < release_tag_key("v3.0-rc1") < release_tag_key("v3.0")
    for bad in ("next-20240301", "v6.8-tree", "xfs-6.8-merge", "v6", "6.8", "v6.8-rc"):
        assert release_tag_key(bad) is None


def test_normalize_commit_id() -> None:
    assert normalize_commit_id(" ABCDEF012345\n") == "abcdef012345"
    assert normalize_commit_id("a" * 40) == "a" * 40
    for bad in ("abcde", "a" * 41, "HEAD~1", "--all", "abcdef^", "abc def", "abcdefg", "", None, 123):
        assert normalize_commit_id(bad) is None


def test_msgid_from_link() -> None:
    def msgid_from_link(value):
        return MessageId.from_ref(value, bare=False)

    assert msgid_from_link("https://lore.kernel.org/r/report-1@example.com/") == "report-1@example.com"
    assert msgid_from_link("https://lore.kernel.org/r/report-1@example.com") == "report-1@example.com"
    assert msgid_from_link("https://lore.kernel.org/linux-mm/abc@x.org/T/#u") == "abc@x.org"
    assert msgid_from_link("https://lore.kernel.org/all/abc@x.org/raw") == "abc@x.org"
    assert msgid_from_link("<https://patch.msgid.link/20240201.1-a@b.c>") == "20240201.1-a@b.c"
    assert msgid_from_link("https://lkml.kernel.org/r/a%2Fb@c.d") == "a/b@c.d"
    assert msgid_from_link("https://lore.kernel.org/r/%3Cx@y.z%3E") == "x@y.z"
    assert msgid_from_link("https://bugzilla.kernel.org/show_bug.cgi?id=1") is None
    assert msgid_from_link("https://lore.kernel.org/linux-mm/") is None
    assert msgid_from_link("not a url") is None


def test_parse_trailers() -> None:
    msg = (
        "subject\n\nbody Link: not at line start\n\n"
        'Fixes: 0123456789AB ("mm: foo")\n'
        "link: https://lore.kernel.org/r/a@b\n"
        "Closes: https://github.com/foo/bar/issues/1\n"
    )
    tr = parse_trailers(msg)
    fixes = [t for t in tr if t.key == "Fixes"]
    assert [(t.commit_id, t.subject) for t in fixes] == [("0123456789ab", "mm: foo")]
    links = [(t.key, t.msgid) for t in tr if t.key != "Fixes"]
    assert links == [("Link", "a@b"), ("Closes", None)]


# ---------------------------------------------------------------------------
# MAINTAINERS
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mnt() -> Maintainers:
    return Maintainers.parse(MAINTAINERS_TEXT)


def test_maintainers_parse(mnt: Maintainers) -> None:
    names = [s.name for s in mnt.sections]
    assert names == [
        "CONTROL GROUP - MEMORY RESOURCE CONTROLLER (MEMCG)",
        "FILESYSTEMS (VFS and infrastructure)",
        "INTEL ETHERNET DRIVERS",
        "MEMORY MANAGEMENT",
        "ROCKCHIP SUPPORT",
        "SCHEDULER",
        "XFS FILESYSTEM",
        "THE REST",
    ]
    mm = mnt.section("MEMORY MANAGEMENT")
    assert mm.maintainers == ("Andrew Morton <akpm@linux-foundation.org>",)
    assert mm.lists == ("linux-mm@kvack.org",)
    assert mm.status == "Maintained"
    assert mm.trees == ("git git://git.kernel.org/pub/scm/linux/kernel/git/akpm/mm",)
    assert mm.files == ("include/linux/gfp.h", "include/linux/mm.h", "mm/")
    sched = mnt.section("SCHEDULER")
    assert sched.excludes == ("kernel/sched/ext.c",)
    assert sched.reviewers == ("Valentin Schneider <vschneid@redhat.com>",)
    assert mnt.section("ROCKCHIP SUPPORT").regexes == ("rockchip",)
    # list notes are dropped
    assert mnt.section("ROCKCHIP SUPPORT").lists == ("linux-rockchip@lists.infradead.org",)


def test_section_keys(mnt: Maintainers) -> None:
    keys = {s.name: s.key for s in mnt.sections}
    assert keys["MEMORY MANAGEMENT"] == "mm"  # not include/linux
    assert keys["XFS FILESYSTEM"] == "fs/xfs"  # not Documentation/... or include/uapi
    assert keys["FILESYSTEMS (VFS and infrastructure)"] == "fs"
    assert keys["SCHEDULER"] == "kernel/sched"
    assert keys["CONTROL GROUP - MEMORY RESOURCE CONTROLLER (MEMCG)"] == "mm"
    assert keys["INTEL ETHERNET DRIVERS"] == "drivers/net/ethernet"
    assert keys["THE REST"] == "the-rest"
    assert keys["ROCKCHIP SUPPORT"] == "rockchip-support"


@pytest.mark.parametrize(
    "path, section",
    [
        ("mm/memory.c", "MEMORY MANAGEMENT"),
        ("mm/kasan/common.c", "MEMORY MANAGEMENT"),  # dir pattern covers subdirs
        ("include/linux/mm.h", "MEMORY MANAGEMENT"),
        ("include/linux/mm.hh", "THE REST"),  # file patterns match whole paths
        ("mm/memcontrol.c", "CONTROL GROUP - MEMORY RESOURCE CONTROLLER (MEMCG)"),  # file beats dir
        ("fs/xfs/xfs_inode.c", "XFS FILESYSTEM"),
        ("fs/xfs/libxfs/xfs_bmap.c", "XFS FILESYSTEM"),
        ("fs/namei.c", "FILESYSTEMS (VFS and infrastructure)"),
        ("include/linux/fs.h", "FILESYSTEMS (VFS and infrastructure)"),
        ("Documentation/filesystems/xfs/index.rst", "XFS FILESYSTEM"),
        ("Documentation/filesystems/xfs/sub/deep.rst", "THE REST"),  # * stays in one level
        ("kernel/sched/core.c", "SCHEDULER"),
        ("kernel/sched/ext.c", "THE REST"),  # X: exclusion
        ("drivers/soc/rockchip/pm.c", "ROCKCHIP SUPPORT"),  # N: regex
        ("drivers/net/ethernet/intel/e1000/e1000_main.c", "INTEL ETHERNET DRIVERS"),  # dir w/o slash
        ("drivers/net/ethernet/intelx.c", "THE REST"),
        ("Makefile", "THE REST"),
        ("lib/string.c", "THE REST"),
    ],
)
def test_best_match(mnt: Maintainers, path: str, section: str) -> None:
    assert mnt.best_for_path(path).section.name == section


def test_match_path_ranking(mnt: Maintainers) -> None:
    names = [m.section.name for m in mnt.match_path("mm/memcontrol.c")]
    assert names == ["CONTROL GROUP - MEMORY RESOURCE CONTROLLER (MEMCG)", "MEMORY MANAGEMENT", "THE REST"]
    # fs/* does not reach into fs/xfs/
    assert [m.section.name for m in mnt.match_path("fs/xfs/xfs_inode.c")] == ["XFS FILESYSTEM", "THE REST"]
    # excluded section is not listed at all
    assert "SCHEDULER" not in [m.section.name for m in mnt.match_path("kernel/sched/ext.c")]
    rk = mnt.best_for_path("drivers/soc/rockchip/pm.c")
    assert (rk.kind, rk.pattern) == ("N", "rockchip")
    assert mnt.best_for_path("Makefile").catch_all


def test_subsystem_for_paths(mnt: Maintainers) -> None:
    m = mnt.subsystem_for_paths(["mm/memory.c", "mm/slub.c", "fs/xfs/xfs_inode.c"])
    assert (m.section, m.key, m.lists) == ("MEMORY MANAGEMENT", "mm", ("linux-mm@kvack.org",))
    assert m.paths == ("mm/memory.c", "mm/slub.c")
    assert m.others == ("MEMORY MANAGEMENT", "XFS FILESYSTEM")
    # catch-all matches do not outvote a real subsystem
    m = mnt.subsystem_for_paths(["Makefile", "README", "kernel/sched/core.c"])
    assert (m.section, m.key) == ("SCHEDULER", "kernel/sched")
    assert m.maintainers == ("Ingo Molnar <mingo@redhat.com>", "Peter Zijlstra <peterz@infradead.org>")
    # a tie goes to the more specific pattern (fs/xfs/ is deeper than mm/)
    m = mnt.subsystem_for_paths(["mm/memory.c", "fs/xfs/xfs_inode.c"])
    assert (m.section, m.key, m.pattern) == ("XFS FILESYSTEM", "fs/xfs", "fs/xfs/")
    m = mnt.subsystem_for_paths(["Makefile"])
    assert (m.section, m.key) == ("THE REST", "the-rest")
    assert mnt.subsystem_for_paths([]) is None
    assert Maintainers.parse("").subsystem_for_paths(["mm/memory.c"]) is None


# ---------------------------------------------------------------------------
# resolution
# ---------------------------------------------------------------------------


def test_resolve_abbreviated(kernel: SimpleNamespace) -> None:
    t = kernel.trees
    for cid in (kernel.c1[:7], kernel.c1[:12], kernel.c1.upper(), f"  {kernel.c1[:12]}\n"):
        info = t.resolve(cid)
        assert info is not None and info.sha == kernel.c1, cid
    info = t.resolve(kernel.c1[:12])
    assert info.subject == "mm: introduce foo"
    assert (info.author_name, info.author_email) == ("Alice Developer", "alice@example.com")
    assert info.author_date.tzinfo is not None
    assert info.author_date == datetime(2024, 1, 1, 11, 0, tzinfo=timezone.utc)
    assert info.author_date.utcoffset() == timedelta(hours=1)
    assert set(info.files) == {"mm/memory.c", "include/linux/mm.h"}
    assert info.parents == (kernel.c0,)
    assert info.trees == ("mainline", "next")
    assert info.mainline is True
    assert info.first_tag == "v6.8-rc1"
    r = t.lookup(kernel.c1[:12])
    assert r.status is ResolveStatus.FOUND and r.ok and r.candidates == (kernel.c1,)


def test_root_commit_files(kernel: SimpleNamespace) -> None:
    info = kernel.trees.resolve(kernel.c0)
    assert set(info.files) == set(BASE_FILES)
    assert info.first_tag == "v6.7"


@pytest.mark.parametrize(
    "attr, tag",
    [("c0", "v6.7"), ("c1", "v6.8-rc1"), ("c2", "v6.8-rc1"), ("c3", "v6.8"), ("c4", "v6.8"),
     ("c5", "v6.8"), ("c6", "v6.9-rc1"), ("c7", "v6.10-rc1"), ("c8", None), ("n1", None)],
)
def test_first_containing_tag(kernel: SimpleNamespace, attr: str, tag: str | None) -> None:
    assert kernel.trees.resolve(getattr(kernel, attr)[:12]).first_tag == tag


def test_next_only_commit(kernel: SimpleNamespace) -> None:
    info = kernel.trees.resolve(kernel.n1[:12])
    assert info.trees == ("next",)
    assert info.mainline is False
    assert info.files == ("fs/xfs/xfs_inode.c",)
    assert info.author_email == "bob@example.org"


def test_merge_commit_files(kernel: SimpleNamespace) -> None:
    info = kernel.trees.resolve(kernel.m1[:12])
    assert info.parents == (kernel.n1, kernel.s1)
    assert info.files == ("kernel/sched/fair.c",)  # vs. first parent
    assert info.trees == ("next",)
    assert kernel.trees.commit_subsystem(kernel.m1).key == "kernel/sched"


def test_not_found(kernel: SimpleNamespace) -> None:
    r = kernel.trees.lookup("deadbeefdead")
    assert r.status is ResolveStatus.NOT_FOUND and r.commit is None
    assert kernel.trees.resolve("deadbeefdead") is None
    assert kernel.trees.commit_subsystem("deadbeefdead") is None


def test_ambiguous(kernel: SimpleNamespace) -> None:
    a, b = kernel.amb
    assert a[:6] == b[:6] and a != b
    r = kernel.trees.lookup(a[:6])
    assert r.status is ResolveStatus.AMBIGUOUS
    assert r.commit is None
    assert r.candidates == (a, b)
    assert kernel.trees.resolve(a[:6]) is None
    assert kernel.trees.commit_subsystem(a[:6]) is None
    # a longer prefix disambiguates
    assert kernel.trees.resolve(a[:20]).sha == a
    assert kernel.trees.resolve(b).sha == b


def test_blob_with_same_prefix_is_ignored(kernel: SimpleNamespace) -> None:
    prefix = kernel.blob_sha[:6]
    assert kernel.blob_commit.startswith(prefix)
    r = kernel.trees.lookup(prefix)
    assert r.status is ResolveStatus.FOUND
    assert r.commit.sha == kernel.blob_commit
    assert r.commit.trees == ()  # unreachable object: in no configured tree
    assert kernel.trees.lookup(kernel.blob_sha).status is ResolveStatus.NOT_FOUND


@pytest.mark.parametrize(
    "hostile",
    ["--output={out}", "HEAD~1", "HEAD", "master", "v6.8", "abcde", "abcdefg", "abcdef^",
     "abcdef~1", "abcdef^{tree}", "abcdef..123456", "abcdef\n--all", "-abcdef", "a" * 41,
     "", "   ", "abcdef:MAINTAINERS", "@{-1}", "abcdef HEAD", ":/mm", "--disambiguate=abc"],
)
def test_hostile_ids_never_reach_git(kernel: SimpleNamespace, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch, hostile: str) -> None:
    out = tmp_path / "x"
    hostile = hostile.replace("{out}", str(out))

    def boom(*a: object, **k: object) -> None:
        raise AssertionError("git was called with untrusted input")

    monkeypatch.setattr(git.cmd.Git, "execute", boom)
    monkeypatch.setattr(git.cmd.Git, "get_object_header", boom)
    r = kernel.trees.lookup(hostile)
    assert r.status is ResolveStatus.INVALID
    assert kernel.trees.resolve(hostile) is None
    assert kernel.trees.commit_subsystem(hostile) is None
    assert not out.exists()


def test_non_string_id(kernel: SimpleNamespace) -> None:
    assert kernel.trees.lookup(None).status is ResolveStatus.INVALID  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# MAINTAINERS from the trees
# ---------------------------------------------------------------------------


def test_commit_subsystem(kernel: SimpleNamespace) -> None:
    t = kernel.trees
    m = t.commit_subsystem(kernel.c1[:12])
    assert (m.section, m.key) == ("MEMORY MANAGEMENT", "mm")
    assert m.lists == ("linux-mm@kvack.org",)
    assert set(m.paths) == {"mm/memory.c", "include/linux/mm.h"}
    assert t.commit_subsystem(kernel.c2[:12]).key == "fs/xfs"
    assert t.commit_subsystem(kernel.c3[:12]).key == "kernel/sched"
    assert t.commit_subsystem(kernel.c5[:12]).section == "THE REST"  # Makefile + MAINTAINERS
    assert t.commit_subsystem(kernel.n1[:12]).section == "XFS FILESYSTEM"


def test_maintainers_read_from_ref(kernel: SimpleNamespace) -> None:
    t = kernel.trees
    # HEAD has the SCHED_EXT section added in 6.8, v6.7 does not
    assert t.subsystem_for_paths(["kernel/sched/ext.c"]).section == "SCHEDULER - SCHED_EXT"
    assert t.subsystem_for_paths(["kernel/sched/ext.c"], ref="v6.7").section == "THE REST"
    assert t.maintainers(ref="v6.7").section("SCHEDULER - SCHED_EXT") is None
    assert t.maintainers(tree="next").section("SCHEDULER - SCHED_EXT") is not None


def test_bare_mirror(kernel: SimpleNamespace) -> None:
    with KernelTrees([TreeSpec(kernel.bare, mainline=True)]) as t:
        assert t.trees[0].name == "linux"
        assert Repo(kernel.bare).bare
        info = t.resolve(kernel.c1[:12])
        assert info.sha == kernel.c1
        assert info.trees == ("linux",) and info.mainline
        assert info.first_tag == "v6.8-rc1"
        assert set(info.files) == {"mm/memory.c", "include/linux/mm.h"}
        assert t.commit_subsystem(kernel.c2[:12]).key == "fs/xfs"
        assert t.maintainers().section("XFS FILESYSTEM").lists == ("linux-xfs@vger.kernel.org",)
        assert t.resolve(kernel.n1[:12]) is None  # next-only
        scan = t.find_fixes({"report-1@example.com"}, set())
        assert [(f.sha, f.trailer, f.tree, f.mainline) for f in scan.fixes] == [
            (kernel.c4, "Closes", "linux", True)
        ]
        assert scan.tips == {"linux": kernel.c8}


# ---------------------------------------------------------------------------
# find_fixes
# ---------------------------------------------------------------------------

MSGIDS = {"report-1@example.com", "<report-2@example.com>", "report-next@example.com", "nobody@nowhere"}


def test_find_fixes_mainline_and_next(kernel: SimpleNamespace) -> None:
    culprits = {kernel.c1[:7], kernel.c2}
    scan = kernel.trees.find_fixes(MSGIDS, culprits)
    assert scan.tips == {"mainline": kernel.c8, "next": kernel.m1}
    got = {(f.tree, f.sha, f.trailer, f.matched, f.mainline) for f in scan.fixes}
    expected_common = {
        (kernel.c4, "Closes", "report-1@example.com"),
        (kernel.c4, "Fixes", kernel.c1[:7]),
        (kernel.c6, "Link", "<report-2@example.com>"),  # case-insensitive, reported as given
    }
    assert got == (
        {("mainline", s, tr, m, True) for s, tr, m in expected_common}
        | {("next", s, tr, m, False) for s, tr, m in expected_common}
        | {("next", kernel.n1, "Closes", "report-next@example.com", False),
           ("next", kernel.n1, "Fixes", kernel.c2, False)}
    )
    rec = next(f for f in scan.fixes if f.sha == kernel.c4 and f.trailer == "Closes")
    assert rec.subject == "mm: fix foo regression"
    assert rec.value == "https://lore.kernel.org/r/report-1@example.com/"
    # restricted to the mainline tree: the next-only fix is not there
    only = kernel.trees.find_fixes(MSGIDS, culprits, trees=["mainline"])
    assert kernel.n1 not in {f.sha for f in only.fixes}
    assert set(only.tips) == {"mainline"}


def test_find_fixes_culprit_matching(kernel: SimpleNamespace) -> None:
    t = kernel.trees
    # 6 hex digits are too short for a prefix match, but both resolve to c1
    scan = t.find_fixes(set(), {kernel.c1[:6]}, trees=["mainline"])
    assert [(f.sha, f.trailer) for f in scan.fixes] == [(kernel.c4, "Fixes")]
    # an unknown 6-digit id that shares the prefix does not match
    other = kernel.c1[:6]
    assert t.find_fixes(set(), {"ffffff" if other != "ffffff" else "eeeeee"}, trees=["mainline"]).fixes == []
    # culprit with a different id does not match; invalid culprits are ignored
    assert t.find_fixes(set(), {kernel.c2[:12], "HEAD~1", "--all"}, trees=["mainline"]).fixes == []
    # c6 fixes c3
    scan = t.find_fixes(set(), {kernel.c3}, trees=["mainline"])
    assert [(f.sha, f.value) for f in scan.fixes] == [
        (kernel.c6, f'{kernel.c3[:12]} ("sched/fair: tweak wakeup preemption")')
    ]
    # the Link to patch.msgid.link is a message id too
    scan = t.find_fixes({"20240201-FIX-foo-v1-1@example.org"}, set(), trees=["mainline"])
    assert [(f.sha, f.trailer) for f in scan.fixes] == [(kernel.c4, "Link")]


def test_find_fixes_short_culprit_needs_resolution(kernel: SimpleNamespace, tmp_path: Path) -> None:
    repo = Repo.clone_from(str(kernel.base / "linux"), str(tmp_path / "linux"))
    a, b = sorted(store_object(repo, b"commit", d) for d in kernel.amb_data)
    fix = commit(repo, {"mm/slub.c": "// slub 9\n"}, f'mm: fix it\n\nFixes: {a[:12]} ("collision {0}")\n')
    with KernelTrees([TreeSpec(tmp_path / "linux", "mainline", mainline=True)]) as t:
        assert t.lookup(a[:6]).status is ResolveStatus.AMBIGUOUS
        # 6 digits that do not resolve to one commit: too short to match
        assert t.find_fixes(set(), {a[:6]}).fixes == []
        # 7 digits always match on the common prefix; the full id matches as well
        for culprit in (a[:7], a):
            assert [f.sha for f in t.find_fixes(set(), {culprit}).fixes] == [fix], culprit
        # the other commit of the pair is a different commit
        assert t.find_fixes(set(), {b}).fixes == []


def test_find_fixes_incremental(kernel: SimpleNamespace, tmp_path: Path) -> None:
    clone = Repo.clone_from(str(kernel.base / "linux"), str(tmp_path / "linux"))
    with KernelTrees([TreeSpec(tmp_path / "linux", "mainline", mainline=True)]) as t:
        first = t.find_fixes(MSGIDS, {kernel.c1})
        assert {(f.sha, f.trailer) for f in first.fixes} == {
            (kernel.c4, "Closes"), (kernel.c4, "Fixes"), (kernel.c6, "Link")}
        assert first.tips == {"mainline": kernel.c8}

        again = t.find_fixes(MSGIDS, {kernel.c1}, since_ref=first.tips)
        assert again.fixes == [] and again.tips == first.tips
        assert again.walked == {"mainline": 0}

        # the cached "no tag" answer is dropped when a tag appears
        assert t.resolve(kernel.c8[:12]).first_tag is None
        clone.create_tag("v6.10", ref=kernel.c8)
        assert t.resolve(kernel.c8[:12]).first_tag == "v6.10"

        new = commit(
            clone,
            {"mm/slub.c": "// slub 3\n"},
            "mm/slub: fix the other thing\n\nCloses: https://lore.kernel.org/linux-mm/report-3@example.com/\n",
        )
        assert t.resolve(new[:12]) is not None  # new objects are seen after the tip moved
        third = t.find_fixes(MSGIDS | {"report-3@example.com"}, {kernel.c1}, since_ref=again.tips)
        assert [(f.sha, f.matched) for f in third.fixes] == [(new, "report-3@example.com")]
        assert third.tips == {"mainline": new}
        assert third.walked == {"mainline": 1}
        assert t.find_fixes(MSGIDS, {kernel.c1}, since_ref=third.tips).fixes == []

        # an unknown last_seen (e.g. gc'd after a rebase) falls back to a bounded walk
        bounded = t.find_fixes(MSGIDS | {"report-3@example.com"}, set(),
                               since_ref={"mainline": "f" * 40}, first_walk_limit=1)
        assert [f.sha for f in bounded.fixes] == [new]


def test_tree_spec_defaults(kernel: SimpleNamespace) -> None:
    assert TreeSpec(kernel.bare).name == "linux"
    assert TreeSpec("/srv/linux-next").name == "linux-next"
    with pytest.raises(ValueError):
        KernelTrees([TreeSpec(kernel.bare, "x"), TreeSpec(kernel.base / "linux", "x")])
    t = KernelTrees.from_config([{"path": str(kernel.bare), "name": "mainline", "mainline": True},
                                 str(kernel.base / "linux-next")])
    assert [(s.name, s.mainline) for s in t.trees] == [("mainline", True), ("linux-next", False)]
    t.close()
