"""Answering: grounded context assembly, answerers and the parsing of answers into claims."""
