"""What one analysis reads: each included file once, whatever the include statements naming it (the index, and
the diagnostics published, which quote the files they point into)."""

from __future__ import annotations

from collections import Counter

from ppdsl.common.diagnostics import Diagnostic, Span
from ppdsl.lsp import server as server_module
from ppdsl.lsp.checking import Checked
from ppdsl.lsp.convert import Units
from ppdsl.lsp.documents import ReaderWorkspace
from ppdsl.lsp.sizes import Sizes
from ppdsl.lsp.symbols import MAX_READS, build_index, read_saved

ORDER = "order { forward * microbatches backward * microbatches optimizer }\n"


def counting(reads: Counter):
    def read(path: str) -> str | None:
        reads[path] += 1
        return read_saved(path)

    return read


def test_the_index_reads_each_included_file_once(tmp_path):
    (tmp_path / "leaf.sched").write_text("param width = 2\n", encoding="utf-8")
    (tmp_path / "costs.sched").write_text('include "leaf.sched"\n' * 50 + "cost forward = 1\n", encoding="utf-8")
    (tmp_path / "link.sched").symlink_to(tmp_path / "costs.sched")  # another name for the same file
    text = ('include "costs.sched"\ninclude "./costs.sched"\ninclude "link.sched"\n' * 100) + ORDER
    text += 'include "missing.sched"\n' * 100  # one that cannot be read is tried once too
    reads: Counter = Counter()
    index = build_index(str(tmp_path / "main.sched"), text, counting(reads))
    assert set(index.files) == {str(tmp_path / n) for n in ("main.sched", "costs.sched", "leaf.sched")}
    assert reads == Counter({str(tmp_path / n): 1 for n in ("costs.sched", "leaf.sched", "missing.sched")})
    assert "width" in index.params  # the included file's names are found


def test_the_index_tries_a_bounded_number_of_paths(tmp_path):
    text = "".join(f'include "missing{i}.sched"\n' for i in range(1000)) + ORDER
    reads: Counter = Counter()
    build_index(str(tmp_path / "main.sched"), text, counting(reads))
    assert len(reads) == MAX_READS and set(reads.values()) == {1}


class Quiet(server_module.PpdslServer):
    """The server's publishing, in process: nothing is sent, and positions are in UTF-16."""

    units = Units("utf-16")

    def text_document_publish_diagnostics(self, params) -> None:
        self.published = params


def test_publishing_reads_each_file_a_diagnostic_points_into_once(tmp_path, monkeypatch):
    included = tmp_path / "costs.sched"
    included.write_text("cost forward = 1\n" * 40, encoding="utf-8")
    main = str(tmp_path / "main.sched")
    text = 'include "costs.sched"\n' * 3 + ORDER
    diags = [Diagnostic("E002", f"bad {i}", Span(str(included), i + 1, 1, i + 1, 5)) for i in range(40)]
    diags += [Diagnostic("E002", "here", Span(main, 4, 1, 4, 6))]
    reads: Counter = Counter()
    monkeypatch.setattr(server_module, "read_saved", counting(reads))
    ls = Quiet()
    ls.protocol._workspace = ReaderWorkspace(None)
    published = ls.publish("file://" + main, 1, Checked(main, Sizes(), diags), text)
    assert len(published) == 41 and reads == Counter({str(included): 1})
    assert published[0].related_information[0].location.range.start.line == 0
