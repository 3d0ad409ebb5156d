"""Progress bars: in a notebook kernel one output replaced in place (its last state is what an executed
notebook stores), no stderr frames, no IProgress warning (not even from the libraries' tqdm.auto);
elsewhere tqdm's text bar."""

import pytest
from conftest import REPO

from typhoon import progress_bars


def test_outside_a_kernel_it_is_tqdms_text_bar(capsys):
    assert not progress_bars.in_notebook_kernel()
    assert list(progress_bars.progress_bar(range(3), "demo", mininterval=0)) == [0, 1, 2]
    assert "demo: 100%" in capsys.readouterr().err
    assert list(progress_bars.progress_bar(range(3), "quiet", enabled=False)) == [0, 1, 2]
    assert "quiet" not in capsys.readouterr().err


@pytest.mark.slow
def test_an_executed_notebook_stores_one_line_per_bar(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    code = (f"import sys\nsys.path.insert(0, {str(REPO)!r})\nfrom typhoon.progress_bars import progress_bar\n"
            "import datasets  # imports tqdm.auto, which warns in a kernel without ipywidgets unless typhoon came first\n"
            "for epoch in (1, 2):\n"
            "    for _ in progress_bar(range(40), f'epoch {epoch}', mininterval=0, leave=False):\n"
            "        pass\nprint('done')")
    nb.cells = [nbformat.v4.new_code_cell(code)]
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = nb.cells[0].outputs
    assert [o.output_type for o in outputs] == ["display_data", "display_data", "stream"]
    assert [o.data["text/plain"].split(":")[0] for o in outputs[:2]] == ["epoch 1", "epoch 2"]
    assert all("100%" in o.data["text/plain"] and "\r" not in o.data["text/plain"] for o in outputs[:2])
    assert outputs[2].name == "stdout" and outputs[2].text == "done\n"  # no stderr: no frames, no warning
