"""The offline prose corpus (typhoon.data.prose_corpus): each reader on hand-written input in its source's
format, the held-out split, and the refusal of a missing source."""

import math

import pytest

from typhoon.data import prose_corpus as pc


def test_rst_keeps_prose_and_note_bodies_and_drops_literal_blocks_and_markup():
    text = """Title
=====

The :func:`open` function returns a :class:`~io.TextIOWrapper`, see `the docs <https://x.org>`_ for **more**.

.. note::

   A note body: a few words of advice for the reader of the page.

Example::

    >>> open("f")
    <file>

A second paragraph with ``literal`` words in it and a few more words.
"""
    paragraphs = list(pc._paragraphs(pc.rst_to_text(text)))
    assert paragraphs == [
        "The open function returns a io.TextIOWrapper, see the docs for more.",
        "A note body: a few words of advice for the reader of the page.",
        "A second paragraph with literal words in it and a few more words.",
    ]


def test_html_reads_publican_and_plain_paragraphs_but_not_code_listings():
    page = """<html><body><div class="navheader">Prev Next navigation words in a header bar here</div>
<div class="para">APT is a <code class="command">tool</code> that installs packages &amp; their dependencies.</div>
<pre class="screen">$ apt-get install a long command line that is code and not prose</pre>
<p>A plain paragraph of ordinary English text that should be kept whole.</p>
<p>Too short.</p></body></html>"""
    assert list(pc.html_paragraphs(page)) == [
        "APT is a tool that installs packages & their dependencies.",
        "A plain paragraph of ordinary English text that should be kept whole.",
    ]


def test_dictd_drops_pronunciations_and_source_tags():
    entry = """Abdication \\Ab`di*ca"tion\\, n. [L. abdicatio: cf. F.
   abdication.]
   The act of abdicating; the renunciation of a high office,
   dignity, or trust, by its holder.
   [1913 Webster]
"""
    (para,) = pc.dictd_paragraphs(entry)
    assert "\\" not in para and "1913 Webster" not in para
    assert para.startswith("Abdication , n. [L. abdicatio") and para.endswith("by its holder.")


def test_wordnet_gloss_and_examples_become_one_sentence_and_the_licence_header_is_skipped():
    lines = ["  1 This software and database is being provided to you | by Princeton under a licence here\n",
             "00001740 03 v 01 breathe 0 001 ! 00002325 v 0000 | draw air into, and expel out of, the lungs; "
             '"I can breathe better when the air is clean"\n']
    assert list(pc.wordnet_glosses(lines)) == [
        "draw air into, and expel out of, the lungs. I can breathe better when the air is clean"]


def test_fortunes_are_split_on_percent_lines_and_lose_their_attribution():
    text = ("A banker is a fellow who lends you his umbrella when the sun is shining\nand wants it back.\n"
            "\t\t-- Mark Twain\n%\nShort one.\n%\n")
    assert list(pc.fortune_paragraphs(text)) == [
        "A banker is a fellow who lends you his umbrella when the sun is shining and wants it back."]


def test_held_out_split_is_stable_and_near_its_rate():
    paragraphs = [f"paragraph number {i} of a synthetic corpus" for i in range(20_000)]
    held = [p for p in paragraphs if pc.is_held_out(p, 50)]
    assert held == [p for p in reversed(paragraphs) if pc.is_held_out(p, 50)][::-1]  # order-independent
    # a Bernoulli(0.05) count over 20,000 paragraphs lies within 5 sd of 1,000
    assert abs(len(held) - 1000) < 5 * math.sqrt(20_000 * 0.05 * 0.95)


def test_a_missing_source_is_named_with_the_command_that_installs_it(tmp_path):
    missing = pc.ProseSource("ghost", "dict-ghost", tmp_path / "nowhere.dict.dz", "none", pc._read_dictd)
    with pytest.raises(FileNotFoundError, match=r"ghost .*nowhere\.dict\.dz.*apt-get install --no-install-recommends "
                                                r"dict-ghost"):
        pc.read_corpus((missing,))


def test_rst_keeps_a_function_description_around_its_example_and_drops_code_directives():
    text = """.. function:: open(file, mode='r')

   Open file and return a corresponding file object, or raise an error.

   For example::

      with open("f") as handle:
          data = handle.read()

   The mode argument is an optional string that specifies the mode in which the file is opened.

.. code-block:: python

   print("this is code and it should never be read as prose")

.. a comment that spans
   two lines and is not prose at all either
"""
    assert list(pc._paragraphs(pc.rst_to_text(text))) == [
        "Open file and return a corresponding file object, or raise an error.",
        "The mode argument is an optional string that specifies the mode in which the file is opened.",
    ]
