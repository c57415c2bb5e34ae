"""Lab backends are found through a registry: built-in names, run-time registrations and the
``regtriage.lab_backends`` entry-point group, so a lab can add a backend from its own package."""

import textwrap

import pytest

from bot.lab.backends import (BUILTIN, ENTRY_POINT_GROUP, LabError, backend_for_handle, backend_names, get_backend,
                              register_backend, unregister_backend)


def test_builtin_backends_resolve_to_their_classes():
    from bot.lab.backends.qemu import QemuBackend

    assert set(BUILTIN) == {"qemu", "ssh", "lkp", "lava"}
    assert isinstance(get_backend("qemu", {"qemu": {}}), QemuBackend)
    with pytest.raises(LabError, match="unknown lab backend"):
        get_backend("no-such-backend")


def test_a_backend_from_another_package_is_found_by_its_entry_point(tmp_path, monkeypatch):
    """An installed distribution (here: a dist-info on sys.path, as pip leaves it) declaring
    ``[regtriage.lab_backends] toy = toylab:ToyBackend`` makes ``toy`` a backend."""
    (tmp_path / "toylab.py").write_text(textwrap.dedent('''
        class ToyBackend:
            def __init__(self, config):
                self.config = config

            @classmethod
            def from_config(cls, config):
                return cls(config)
    '''))
    dist = tmp_path / "toylab-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toylab\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\ntoy = toylab:ToyBackend\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "toy" in backend_names()
    backend = get_backend("toy", {"lab": 1})
    assert type(backend).__name__ == "ToyBackend" and backend.config == {"lab": 1}
    assert type(backend_for_handle("toy:run-1")).__name__ == "ToyBackend"


def test_a_registered_factory_wins_and_can_be_removed():
    made = []
    register_backend("qemu", lambda config: made.append(config) or "stand-in")
    try:
        assert get_backend("qemu", {"x": 1}) == "stand-in" and made == [{"x": 1}]
    finally:
        unregister_backend("qemu")
    assert get_backend("qemu", {"qemu": {}}) != "stand-in"
    with pytest.raises(ValueError):
        register_backend("bad name!", lambda config: None)
