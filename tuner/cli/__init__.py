"""The command line: parsing and checking flags, dispatching the subcommands, rendering their output."""
