"""bankml.models.registry: router names, aliases, pins found by name and by sha256, and the identity cache."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from bankml.errors import ModelRefused, PinMismatch
from bankml.models import registry, verify
from bankml.models.registry import Registry, Verified
from gguf_writer import tiny_llama

PROV = {"how": "written by tests/test_registry.py"}


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    """Empty models and forks directories, set as $BANKML_MODELS and $BANKML_FORKS."""
    models, forks = tmp_path / "models", tmp_path / "forks"
    models.mkdir()
    forks.mkdir()
    monkeypatch.setenv("BANKML_MODELS", str(models))
    monkeypatch.setenv("BANKML_FORKS", str(forks))
    return models, forks


def tiny(path: Path, **kw) -> Path:
    """A tiny llama file the guard plays at `path` (tiny_llama's arguments: n_layer=1 makes another size)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(tiny_llama(**kw))
    return path


def names(reg: Registry) -> list[str]:
    return [e.name for e in reg.entries()]


class Counting:
    """verify.sha256_file, counting its calls; its in-process cache emptied, so that each call reads the file."""

    def __init__(self, monkeypatch):
        self.calls: list[str] = []
        real = verify.sha256_file
        monkeypatch.setattr(verify, "_HASH_CACHE", {})

        def counted(path, progress=None):
            self.calls.append(os.path.basename(os.fspath(path)))
            return real(path, progress)

        monkeypatch.setattr(verify, "sha256_file", counted)


# --- naming ---------------------------------------------------------------------------------------------------

def test_names_are_the_routers(dirs):
    models, _ = dirs
    tiny(models / "SmolLM2-135M-Q4_1.gguf")                       # case kept
    tiny(models / "mmproj-SmolLM2.gguf")                          # a projector alone is no model
    tiny(models / "mtp-draft.gguf")                               # nor a draft
    tiny(models / "folder" / "weights.gguf")                      # a sub-folder: the folder's name
    tiny(models / "folder" / "mmproj-weights.gguf")
    tiny(models / "folder" / "dflash-weights.gguf")
    tiny(models / "sharded" / "big-00002-of-00002.gguf")
    tiny(models / "sharded" / "big-00001-of-00002.gguf")          # its first shard
    tiny(models / "projector-only" / "mmproj-x.gguf")             # no model file: not listed
    (models / "empty").mkdir()
    (models / "notes.txt").write_text("not a model")
    reg = Registry()
    assert names(reg) == ["SmolLM2-135M-Q4_1", "folder", "sharded"]
    by = {e.name: e for e in reg.entries()}
    assert by["folder"].path == models / "folder" / "weights.gguf"
    assert by["sharded"].path == models / "sharded" / "big-00001-of-00002.gguf"
    e = by["SmolLM2-135M-Q4_1"]
    assert e.source == "models_dir" and e.pin is None and e.root == models
    assert e.size == (models / "SmolLM2-135M-Q4_1.gguf").stat().st_size


def test_hidden_temporary_and_working_files_are_skipped(dirs):
    models, _ = dirs
    tiny(models / "real.gguf")
    tiny(models / ".hidden.gguf")
    tiny(models / ".pull-abc123" / "real2.gguf")                   # pull's temporary folder
    tiny(models / ".git" / "x.gguf")
    tiny(models / "derived" / "smollm2-f32.gguf")                 # the tests' working folder
    (models / ".pin-x1y2.tmp").write_text("{}")
    (models / "half.gguf.tmp").write_bytes(b"GGUF")
    (models / "half.gguf.part").write_bytes(b"GGUF")
    tiny(models / "folder" / ".hidden.gguf")                      # a folder with only hidden files: no model
    assert names(Registry()) == ["real"]


def test_every_gguf_in_the_name_is_dropped_as_preset_cpp_does(dirs):
    models, _ = dirs
    tiny(models / "a.gguf.b.gguf")
    assert names(Registry()) == ["a.b"]


def test_several_models_directories(tmp_path, dirs):
    a, b = tmp_path / "a", tmp_path / "b"
    tiny(a / "one.gguf")
    tiny(b / "two.gguf")
    reg = Registry([a, b, tmp_path / "missing"], [])
    assert [(e.name, e.root) for e in reg.entries()] == [("one", a), ("two", b)]


def test_rescanned_each_call(dirs):
    models, _ = dirs
    reg = Registry()
    assert reg.entries() == [] and reg.resolve("m") is None
    tiny(models / "m.gguf")
    assert reg.resolve("m").path == models / "m.gguf"
    (models / "m.gguf").unlink()
    reg.reload()
    assert reg.entries() == []


# --- aliases and resolving -----------------------------------------------------------------------------------

def test_aliases(dirs):
    models, _ = dirs
    tiny(models / "SmolLM2-135M-Instruct-Q4_1.gguf")
    e = Registry().resolve("SmolLM2-135M-Instruct-Q4_1")
    assert e.aliases == ("smollm2-135m-instruct-q4_1", "SmolLM2-135M-Instruct-Q4_1:latest",
                         "smollm2-135m-instruct-q4_1:latest", "SmolLM2-135M-Instruct-Q4_1.gguf",
                         "SmolLM2-135M-Instruct", "smollm2-135m-instruct")
    reg = Registry()
    for a in e.aliases:
        assert reg.resolve(a) == e, a
    assert reg.resolve("SMOLLM2-135M-INSTRUCT-Q4_1") is None  # only the lower-cased stem, not any case


def test_weight_base_only_when_unique(dirs):
    models, _ = dirs
    tiny(models / "smollm2-135m-instruct-q4_1.gguf")
    tiny(models / "smollm2-135m-instruct-q8_0.gguf")
    tiny(models / "gemma-3-270m-Q4_K_M.gguf")
    reg = Registry()
    assert reg.resolve("smollm2-135m-instruct") is None        # two weight types: ambiguous, so no alias
    assert all("smollm2-135m-instruct" not in e.aliases for e in reg.entries())
    assert reg.resolve("gemma-3-270m").name == "gemma-3-270m-Q4_K_M"
    assert reg.resolve("smollm2-135m-instruct-q8_0:latest").name == "smollm2-135m-instruct-q8_0"
    assert [registry.weight_base(n) for n in ("x-f16", "x.BF16", "x-iq4_xs", "x-q4_0", "plain", "q4_0")] == \
        ["x", "x", "x", "x", None, None]


def test_exact_name_first_then_ambiguous_aliases(dirs):
    models, _ = dirs
    tiny(models / "Foo.gguf")
    tiny(models / "foo.gguf")
    reg = Registry()
    assert reg.resolve("foo").path == models / "foo.gguf"       # an exact name beats Foo's alias
    assert reg.resolve("Foo").path == models / "Foo.gguf"
    assert reg.resolve("foo:latest") is None                    # both have it: ambiguous
    assert len(reg.matches("foo:latest")) == 2
    assert reg.resolve("bar") is None


def test_same_name_twice_is_ambiguous(dirs):
    models, _ = dirs
    tiny(models / "m.gguf")
    tiny(models / "m" / "weights.gguf")
    reg = Registry()
    assert names(reg) == ["m", "m"]
    assert reg.resolve("m") is None
    assert reg.resolve("m.gguf").path == models / "m.gguf"      # only the file has this alias
    assert reg.resolve("weights.gguf").path == models / "m" / "weights.gguf"


@pytest.mark.parametrize("bad", ["../m", "m/../m", "sub/weights.gguf", "..", ".", "", "/etc/passwd", "m\0"])
def test_names_never_leave_the_directory(dirs, bad):
    models, _ = dirs
    tiny(models / "m.gguf")
    tiny(models / "sub" / "weights.gguf")
    reg = Registry()
    assert reg.resolve(bad) is None and reg.matches(bad) == []
    assert reg.resolve("m") is not None


# --- pins in the registry ------------------------------------------------------------------------------------

def test_entry_pin_beside_or_in_a_forks_directory(dirs):
    models, forks = dirs
    verify.pin(tiny(models / "a.gguf"), PROV)
    verify.pin(tiny(models / "b.gguf"), PROV)
    (models / "b.gguf.FORK.json").rename(forks / "b.gguf.FORK.json")
    tiny(models / "c.gguf")
    by = {e.name: e for e in Registry().entries()}
    assert by["a"].pin == models / "a.gguf.FORK.json"
    assert by["b"].pin == forks / "b.gguf.FORK.json"
    assert by["c"].pin is None
    assert names(Registry()) == ["a", "b", "c"]                  # pins are not models themselves


def _pin_naming(pin_path: Path, files: list[Path]) -> None:
    entries = [{"path": f.name, "bytes": f.stat().st_size, "sha256": verify.sha256_file(f)} for f in files]
    verify.write_pin(pin_path, verify.make_pin(entries, PROV))


def test_files_named_only_by_a_pin(dirs):
    models, forks = dirs
    weird = tiny(models / "weird.bin")                          # no .gguf: the scan does not see it
    _pin_naming(models / "weird.gguf.FORK.json", [weird])
    other = tiny(models / "other.model")
    _pin_naming(forks / "other.gguf.FORK.json", [other])         # a forks pin names files of the models dir
    _pin_naming(forks / "gone.gguf.FORK.json", [tiny(forks / "gone.bin")])   # its file is not in models/
    hidden = tiny(models / ".hidden.bin")
    _pin_naming(models / "hid.gguf.FORK.json", [hidden])
    (models / "broken.gguf.FORK.json").write_text("{")          # an invalid pin names nothing
    by = {e.name: e for e in Registry().entries()}
    assert sorted(by) == ["other", "weird"]
    assert by["weird"].source == "pin" and by["weird"].path == weird and by["weird"].pin == models / "weird.gguf.FORK.json"
    assert by["other"].source == "pin" and by["other"].pin == forks / "other.gguf.FORK.json"
    assert verify.verify(weird).by_content                      # no pin of its own name: found by sha256


def test_a_pin_cannot_name_a_file_outside_its_directory(dirs, tmp_path):
    models, _ = dirs
    outside = tiny(tmp_path / "outside.bin")
    (models / "link").symlink_to(tmp_path)                      # models/link/outside.bin is outside models/
    pin = verify.make_pin([{"path": "link/outside.bin", "bytes": outside.stat().st_size,
                            "sha256": verify.sha256_file(outside)}], PROV)
    verify.write_pin(models / "outside.gguf.FORK.json", pin)
    assert [e for e in Registry().entries() if e.source == "pin"] == []


# --- pins by content -----------------------------------------------------------------------------------------

def test_a_renamed_copy_verifies_under_the_pin(dirs):
    models, _ = dirs
    orig = tiny(models / "orig.gguf")
    verify.pin(orig, PROV)
    copy = models / "my-name.gguf"
    shutil.copyfile(orig, copy)
    rep = verify.verify(copy)
    assert rep.by_content and rep.pinned_as == "orig.gguf" and rep.pin_path == str(models / "orig.gguf.FORK.json")
    assert rep.sha256 == verify.sha256_file(orig) and rep.provenance == PROV
    d = rep.to_dict()
    assert d["pin_match"] == "sha256" and d["pinned_as"] == "orig.gguf"
    named = verify.verify(orig)
    assert not named.by_content and named.to_dict()["pin_match"] == "name"


def test_a_renamed_copy_elsewhere_finds_a_forks_pin(dirs, tmp_path):
    models, forks = dirs
    orig = tiny(models / "orig.gguf")
    verify.pin(orig, PROV)
    (models / "orig.gguf.FORK.json").rename(forks / "orig.gguf.FORK.json")
    copy = tmp_path / "elsewhere" / "x.gguf"
    copy.parent.mkdir()
    shutil.copyfile(orig, copy)
    assert verify.verify(copy).pin_path == str(forks / "orig.gguf.FORK.json")


def test_a_renamed_copy_of_smollm2_is_smollm2(smollm2_path, tmp_path, monkeypatch):
    monkeypatch.delenv("BANKML_FORKS", raising=False)
    copy = tmp_path / "whatever-i-like.gguf"
    try:
        os.link(smollm2_path, copy)
    except OSError:
        shutil.copyfile(smollm2_path, copy)
    rep = verify.verify(copy, progress=False)
    assert rep.by_content and rep.pinned_as == "smollm2-135m-instruct-q4_1.gguf"
    assert Path(rep.pin_path) == verify.SHIPPED_FORKS / "smollm2-135m-instruct-q4_1.gguf.FORK.json"


def test_a_flipped_byte_is_refused(dirs):
    models, _ = dirs
    orig = tiny(models / "orig.gguf")
    verify.pin(orig, PROV)
    data = bytearray(orig.read_bytes())
    data[-7] ^= 0x10
    bad = models / "renamed.gguf"
    bad.write_bytes(bytes(data))
    with pytest.raises(PinMismatch, match=r"no pin \(renamed.gguf.FORK.json\) found; .*no single-file pin .* lists "
                                          r"its size and sha256; `bankml pin .*renamed.gguf` pins it"):
        verify.verify(bad)


def test_the_refusal_gives_the_command_that_pins(dirs, capsys):
    from bankml import cli

    models, _ = dirs
    m = tiny(models / "unpinned model.gguf")
    with pytest.raises(PinMismatch) as e:
        verify.verify(m)
    cmd = e.value.reason.split("`")[1]
    assert cmd == f"bankml pin '{m}'"
    import shlex
    argv = shlex.split(cmd)
    assert cli.main(argv[1:]) == 0
    capsys.readouterr()
    assert verify.verify(m).pin_path == str(verify.pin_path_beside(m))


def test_only_single_file_pins_match_by_content(dirs):
    models, _ = dirs
    a, b = tiny(models / "a.gguf"), tiny(models / "b.gguf", n_layer=1)
    _pin_naming(models / "pair.gguf.FORK.json", [a, b])
    copy = models / "a-copy.gguf"
    shutil.copyfile(a, copy)
    with pytest.raises(PinMismatch, match="no pin"):
        verify.verify(copy)
    assert verify.find_pin_by_sha256(verify.sha256_file(a), a.stat().st_size, [models]) is None


def test_a_pin_by_name_is_not_bypassed_by_content(dirs):
    models, _ = dirs
    a = tiny(models / "a.gguf")
    verify.pin(a, PROV)
    b = tiny(models / "b.gguf", n_layer=1)
    verify.pin(b, PROV)
    b.write_bytes(a.read_bytes())                               # b's bytes are a's, but b has a pin of its own
    with pytest.raises(PinMismatch, match="b.gguf has"):
        verify.verify(b)


def test_no_hashing_when_no_pin_lists_the_size(dirs, monkeypatch):
    models, _ = dirs
    verify.pin(tiny(models / "pinned.gguf"), PROV)
    lonely = tiny(models / "lonely.gguf", n_layer=1)            # another size than every pin lists
    count = Counting(monkeypatch)
    with pytest.raises(PinMismatch, match="no pin"):
        verify.verify(lonely)
    assert count.calls == []


def test_guard_refusals_come_before_any_pin(dirs):
    models, _ = dirs
    (models / "bad.gguf").write_bytes(b"GGUF" + b"\0" * 4)
    with pytest.raises(ModelRefused):
        verify.verify(models / "bad.gguf")


# --- the identity cache --------------------------------------------------------------------------------------

def test_identity(dirs):
    models, _ = dirs
    m = tiny(models / "m.gguf")
    st = m.stat()
    assert registry.identity(m) == (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def test_verified_does_not_rehash_an_unchanged_file(dirs, monkeypatch):
    models, _ = dirs
    m = tiny(models / "m.gguf")
    verify.pin(m, PROV)
    count = Counting(monkeypatch)
    cache = Verified()
    seen = []
    first = cache.check(m, progress=lambda done, total: seen.append((done, total)))
    assert count.calls == ["m.gguf"] and first.pin_path == str(verify.pin_path_beside(m))
    assert seen and seen[-1] == (m.stat().st_size, m.stat().st_size)   # the first check hashes, with progress
    assert cache.check(m) is first and cache.check(str(m)) is first
    assert count.calls == ["m.gguf"]                            # no second hash
    assert cache.same(m, first)


def test_verified_rehashes_after_a_change(dirs, monkeypatch):
    models, _ = dirs
    m = tiny(models / "m.gguf")
    verify.pin(m, PROV)
    count = Counting(monkeypatch)
    cache = Verified()
    first = cache.check(m)
    st = m.stat()
    os.utime(m, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))   # touched: same bytes, new identity
    assert not cache.same(m, first)
    second = cache.check(m)
    assert second is not first and second.sha256 == first.sha256
    assert count.calls == ["m.gguf", "m.gguf"]
    assert cache.same(m, second) and not cache.same(m, first)
    data = bytearray(m.read_bytes())
    data[-3] ^= 1
    m.write_bytes(bytes(data))                                  # modified: verify again, and refuse
    with pytest.raises(PinMismatch, match="m.gguf has sha256"):
        cache.check(m)
    assert count.calls == ["m.gguf"] * 3
    assert not cache.same(m, second)
    with pytest.raises(PinMismatch):                            # a refusal is not remembered
        cache.check(m)
    assert len(count.calls) == 4


def test_verified_checks_again_when_the_pin_changes(dirs, monkeypatch):
    models, _ = dirs
    m = tiny(models / "m.gguf")
    pin_path = verify.pin(m, PROV)
    cache = Verified()
    first = cache.check(m)
    pin = json.loads(pin_path.read_text())
    pin["files"][0]["sha256"] = "0" * 64
    pin_path.write_text(json.dumps(pin))
    os.utime(pin_path, ns=(0, 10**9))
    assert not cache.same(m, first)
    with pytest.raises(PinMismatch, match="the pin .* says 0000"):
        cache.check(m)


def test_verified_same_needs_its_own_report(dirs):
    models, _ = dirs
    m = tiny(models / "m.gguf")
    verify.pin(m, PROV)
    cache = Verified()
    other = verify.verify(m)
    assert not cache.same(m, other)                             # this cache never verified it
    rep = cache.check(m)
    assert cache.same(m, rep) and not cache.same(m, other)
    cache.forget(m)
    assert not cache.same(m, rep)
    m.unlink()
    with pytest.raises(OSError):
        cache.check(m)


def test_verified_a_renamed_copy(dirs, monkeypatch):
    models, _ = dirs
    orig = tiny(models / "orig.gguf")
    verify.pin(orig, PROV)
    copy = models / "copy.gguf"
    shutil.copyfile(orig, copy)
    count = Counting(monkeypatch)
    cache = Verified()
    rep = cache.check(copy)
    assert rep.by_content and cache.check(copy) is rep
    assert count.calls == ["copy.gguf"]
