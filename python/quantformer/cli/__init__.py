"""Layer 9: the command line, the one contract between R and the core. Each verb parses its
flags, calls the library with keyword arguments and writes the result; nothing imports this
package. argparse and ``--flag`` wording live here only."""
