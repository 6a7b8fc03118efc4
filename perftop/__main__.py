from perftop.cli import entry

entry()
