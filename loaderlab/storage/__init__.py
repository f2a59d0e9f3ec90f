"""Module 10: object storage, a real S3 server and the course's emulated network in front of it."""
