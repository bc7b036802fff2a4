import pytest

from kernelpath.cli import main


def test_demo_runs_and_reports(capsys):
    assert main(["demo", "--n-train", "800", "--n-test", "200", "--n-centers", "100"]) == 0
    out = capsys.readouterr().out
    assert "best point: penalty=" in out and "test RMSE" in out


def test_info(capsys):
    assert main(["info"]) == 0
    assert "memory_budget" in capsys.readouterr().out


def test_bad_arguments():
    with pytest.raises(SystemExit):
        main(["demo", "--n-train", "1"])
    with pytest.raises(SystemExit):
        main(["demo", "--solver", "sgd"])


def test_demo_on_a_torch_device(capsys):
    pytest.importorskip("torch")
    args = ["demo", "--n-train", "800", "--n-test", "200", "--n-centers", "100"]
    assert main([*args, "--device", "cpu"]) == 0
    assert "computed on cpu" in capsys.readouterr().out


def test_demo_bad_device(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--device", "tpu"])
    assert exc.value.code == 2
    assert "--device" in capsys.readouterr().err
