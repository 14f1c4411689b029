"""`arbiter import fishtest`: a Fishtest mongodump made into an Arbiter instance."""
