"""A test kit of real AT Protocol parts for the suite and for operators: a PLC directory, space
authorities that mint real credentials (ES256 and ES256K), members that sign requests, and a fake
space network (repo hosts and a space host speaking the sync wire, `spacenet`)."""
