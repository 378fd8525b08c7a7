"""Keeping spaces current from the network: verified pulls from repo hosts, notifications, polling."""
