def clean(line):
    return line.strip().lower()
