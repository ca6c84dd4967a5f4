"""The kit's two data types and their storage: the collection interface, runs with the one tie
rule, the verified run store."""
