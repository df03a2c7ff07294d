"""Reads a debian/copyright file with python3-debian's strict machine-readable
(DEP-5) parser: the Format line names copyright-format 1.0, every Files
paragraph has a Copyright and a License, and a License given by name alone has
its text in a standalone License paragraph. Prints "ok" and the licenses;
exits non-zero with the parser's complaint otherwise."""
import sys
import warnings

warnings.simplefilter("error")
from debian import copyright  # noqa: E402

with open(sys.argv[1], encoding="utf-8") as source:
    parsed = copyright.Copyright(source, strict=True)
if parsed.header.format != copyright._CURRENT_FORMAT:
    sys.exit(f"Format: {parsed.header.format!r}, not {copyright._CURRENT_FORMAT}")
files = list(parsed.all_files_paragraphs())
if not files:
    sys.exit("no Files paragraph")
standalone = {paragraph.license.synopsis for paragraph in parsed.all_license_paragraphs()}
for paragraph in files:
    if not paragraph.copyright or not paragraph.license:
        sys.exit(f"Files: {' '.join(paragraph.files)} lacks Copyright or License")
    if not paragraph.license.text and paragraph.license.synopsis not in standalone:
        sys.exit(f"License {paragraph.license.synopsis!r} has no text")
print("ok", " ".join(sorted({paragraph.license.synopsis for paragraph in files})))
