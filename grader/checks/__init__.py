"""What each exercise is checked for, one module per exercise; run inside a fresh process."""
