"""The HTML report of a reproduction: the executed analysis notebooks on one page, code hidden."""

from __future__ import annotations

from pathlib import Path

from typhoon.records import atomic_write_text


def render_report(notebooks: list[Path], target: Path) -> Path:
    """One HTML page with the executed notebooks ``notebooks`` in order, code cells and parameters hidden."""
    import nbformat
    from nbconvert import HTMLExporter

    merged = nbformat.v4.new_notebook()
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        merged.cells.append(nbformat.v4.new_markdown_cell(f"---\n*From `{path.name}`*"))
        merged.cells.extend(c for c in nb.cells if "parameters" not in c.get("metadata", {}).get("tags", []))
    exporter = HTMLExporter(exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(merged)
    atomic_write_text(target, body)
    return target
