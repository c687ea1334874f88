//! Parsers and formatters for the text `ethtool` prints (`-i`, `-S`, `-l`, `-g`, `-k`, `-c`).
