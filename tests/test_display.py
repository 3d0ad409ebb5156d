"""The notebooks' table view (typhoon.report.display): readable numbers, a few rows, and where the whole table is."""

import math

import pandas as pd

from typhoon.report.display import number_format, show_frame


def test_numbers_read_as_a_person_writes_them():
    assert number_format(16.0, whole=True) == "16" and number_format(1234.0, whole=True) == "1,234"
    assert number_format(0.84761, whole=False) == "0.8476"
    assert number_format(2.98e-05, whole=False) == "2.980e-05"  # tiny values keep their magnitude
    assert number_format(7.0201, whole=False) == "7.02"
    assert number_format(math.nan, whole=False) == "—" and number_format("f1", whole=False) == "f1"


def test_a_long_table_shows_its_first_rows_and_says_where_the_rest_is():
    frame = pd.DataFrame({"count": [16.0, 3.0, None] * 50, "kl": [1e-5, 0.25, 0.5] * 50, "name": ["a", "b", "c"] * 50})
    styled = show_frame(frame, max_rows=5, saved_as="stats/x.csv")
    html = styled.to_html()
    assert html.count("<tr>") == 6  # the header and 5 rows
    assert "5 of 150 rows; the whole table: stats/x.csv" in html
    assert ">16<" in html and "16.0" not in html and "1.000e-05" in html and "—" in html
    assert "3 rows" in show_frame(frame.head(3)).to_html()
