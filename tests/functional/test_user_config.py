"""Persistent user defaults (`nel config show|set|unset`): kept in $XDG_CONFIG_HOME/nel/config.toml, applied to
every command that takes their flag, overridden by flags and by a config file's own values; never a secret."""

from __future__ import annotations

import tomllib
from pathlib import Path

import orjson
import pytest
from nel_helpers import assert_ok, assert_one_line_error, clean_env, free_port, nel

from workbench.store import open_store


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """An environment whose user config directory is the test's own."""
    return clean_env(XDG_CONFIG_HOME=str(tmp_path / "xdg"))


def config_path(tmp_path: Path) -> Path:
    return tmp_path / "xdg" / "nel" / "config.toml"


def set_(tmp_path: Path, env: dict[str, str], **values: str) -> None:
    for key, value in values.items():
        assert_ok(nel("config", "set", key, value, cwd=tmp_path, env=env))


class TestShowSetUnset:
    """The file and the three subcommands."""

    def test_set_writes_toml_show_lists_every_key_unset_removes(self, tmp_path, home):
        set_(tmp_path, home, model_url="http://localhost:8000/v1", model_id="llama", output_dir="evals")
        assert tomllib.loads(config_path(tmp_path).read_text()) == {
            "model_url": "http://localhost:8000/v1", "model_id": "llama", "output_dir": "evals"}
        shown = nel("config", "show", cwd=tmp_path, env=home)
        assert_ok(shown)
        assert str(config_path(tmp_path)) in shown.stdout.splitlines()[0]
        assert [line.split()[0] for line in shown.stdout.splitlines()[1:]] == [
            "model_url", "model_id", "store", "output_dir"]
        assert 'model_id    = "llama"' in shown.stdout and "store       = (unset)" in shown.stdout
        unset = nel("config", "unset", "model_id", cwd=tmp_path, env=home)
        assert_ok(unset)
        assert "model_id: removed" in unset.stdout
        values = orjson.loads(nel("config", "show", "--json", cwd=tmp_path, env=home).stdout)["values"]
        assert values == {"model_url": "http://localhost:8000/v1", "output_dir": "evals"}
        assert "was not set" in nel("config", "unset", "model_id", cwd=tmp_path, env=home).stdout

    def test_an_unknown_key_lists_the_known_ones(self, tmp_path, home):
        line = assert_one_line_error(nel("config", "set", "modle_url", "x", cwd=tmp_path, env=home), 2)
        assert "modle_url: unknown key; known keys: model_url, model_id, store, output_dir" in line
        assert not config_path(tmp_path).exists()

    @pytest.mark.parametrize("key", ["api_key", "hf_token", "password"])
    def test_a_secret_is_never_written_nor_echoed(self, tmp_path, home, key):
        proc = nel("config", "set", key, "sk-live-0123456789abcdef", cwd=tmp_path, env=home)
        assert "looks like a secret" in assert_one_line_error(proc, 2)
        assert "0123456789abcdef" not in proc.stdout + proc.stderr
        assert not config_path(tmp_path).exists()

    def test_a_url_with_credentials_is_refused(self, tmp_path, home):
        for url in ("http://user:pw-0123456789@host/v1", "http://host/v1?api_key=0123456789abcdef"):
            proc = nel("config", "set", "model_url", url, cwd=tmp_path, env=home)
            assert "carries credentials" in assert_one_line_error(proc, 2)
            assert "0123456789" not in proc.stdout + proc.stderr

    def test_a_malformed_file_is_one_line_naming_it_for_every_command(self, tmp_path, home):
        config_path(tmp_path).parent.mkdir(parents=True)
        config_path(tmp_path).write_text("model_url = http://unquoted\n")
        for args in (("config", "show"), ("sql", "SELECT 1"), ("eval", "stats", "nosuch")):
            line = assert_one_line_error(nel(*args, cwd=tmp_path, env=home), 2)
            assert f"{config_path(tmp_path)}: not valid TOML" in line, args

    def test_an_unknown_key_in_the_file_is_named(self, tmp_path, home):
        config_path(tmp_path).parent.mkdir(parents=True)
        config_path(tmp_path).write_text('model = "x"\n')
        line = assert_one_line_error(nel("config", "show", cwd=tmp_path, env=home), 2)
        assert f"{config_path(tmp_path)}: model: unknown key" in line

    def test_home_config_is_the_default_without_xdg(self, tmp_path):
        env = clean_env(HOME=str(tmp_path / "home"))
        env.pop("XDG_CONFIG_HOME", None)
        assert_ok(nel("config", "set", "model_id", "m", cwd=tmp_path, env=env))
        assert (tmp_path / "home" / ".config" / "nel" / "config.toml").is_file()


class TestAppliedToCommands:
    """The defaults fill what a command line leaves out; a flag or a config file's value wins."""

    def test_eval_run_needs_no_model_flags_and_writes_to_the_default_output_dir(self, mock, tmp_path, home):
        set_(tmp_path, home, model_url=mock.base_url, model_id="nel-mock", output_dir="evals")
        assert_ok(nel("eval", "run", "-b", "gsm8k", "-n", "1", "-m", "3", "--no-progress", cwd=tmp_path, env=home))
        [run] = open_store(tmp_path / "evals" / "nel.duckdb").dicts("SELECT model_id, model_url FROM runs")
        assert run == {"model_id": "nel-mock", "model_url": f"{mock.base_url}/chat/completions"}
        counted = nel("sql", "SELECT count(*) AS n FROM steps", "--format", "json", cwd=tmp_path, env=home)
        assert_ok(counted)
        assert orjson.loads(counted.stdout) == [{"n": 3}]  # `nel sql` found the store through output_dir

    def test_flags_override_the_defaults(self, mock, tmp_path, home):
        set_(tmp_path, home, model_url=f"http://127.0.0.1:{free_port()}/v1", model_id="nobody", store="default.duckdb")
        assert_ok(nel("eval", "run", "-b", "gsm8k", "-n", "1", "-m", "2", "--model-url", mock.base_url, "--model-id",
                      "nel-mock", "-o", "flagged", "--no-progress", cwd=tmp_path, env=home))
        assert (tmp_path / "flagged" / "nel.duckdb").is_file() and not (tmp_path / "default.duckdb").exists()
        [run] = open_store(tmp_path / "flagged" / "nel.duckdb").dicts("SELECT model_id FROM runs")
        assert run["model_id"] == "nel-mock"

    def test_the_default_store_serves_readers(self, mock, tmp_path, home):
        set_(tmp_path, home, model_url=mock.base_url, model_id="nel-mock", store="shared/nel.duckdb")
        assert_ok(nel("eval", "run", "-b", "gsm8k", "-n", "1", "-m", "2", "--no-progress", cwd=tmp_path, env=home))
        assert (tmp_path / "shared" / "nel.duckdb").is_file()
        listed = nel("sql", "SELECT count(*) AS n FROM runs", "--format", "json", cwd=tmp_path, env=home)
        assert orjson.loads(listed.stdout) == [{"n": 1}]

    def test_a_config_file_keeps_its_own_output_and_takes_the_default_when_it_has_none(self, mock, tmp_path, home):
        set_(tmp_path, home, output_dir="from-defaults")
        suite = (f"services:\n  main: {{type: api, url: {mock.base_url}, model: nel-mock}}\n"
                 "benchmarks:\n  - {name: gsm8k, repeats: 1, max_problems: 2}\n")
        (tmp_path / "plain.yaml").write_text(suite)
        (tmp_path / "own.yaml").write_text(suite + "output: {dir: from-config}\n")
        for name in ("plain.yaml", "own.yaml"):
            assert_ok(nel("eval", "run", name, "--no-progress", cwd=tmp_path, env=home))
        assert (tmp_path / "from-defaults" / "nel.duckdb").is_file()
        assert (tmp_path / "from-config" / "nel.duckdb").is_file()
        assert len(open_store(tmp_path / "from-defaults" / "nel.duckdb").dicts("SELECT run_id FROM runs")) == 1

    def test_validate_runs_against_the_default_model_unless_told_not_to(self, mock, tmp_path, home):
        set_(tmp_path, home, model_url=mock.base_url, model_id="nel-mock")
        with_model = nel("validate", "-b", "gsm8k", "--samples", "2", cwd=tmp_path, env=home)
        assert_ok(with_model)
        assert "problems passed against nel-mock" in with_model.stdout
        key_only = nel("validate", "-b", "gsm8k", "--samples", "2", "--no-model", cwd=tmp_path, env=home)
        assert_ok(key_only)
        assert "2/2 sampled expected answers score 1.0" in key_only.stdout
