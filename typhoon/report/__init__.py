"""What a reader sees: figures, the HTML report and its browser check, the README results block, and the
tables and demos the setup and walkthrough notebooks show."""
