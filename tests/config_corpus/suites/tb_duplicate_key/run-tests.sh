pytest -rA $TEST_DIR
