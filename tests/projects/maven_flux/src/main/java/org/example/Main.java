package org.example;

/** Java sources are compiled into the jar's classes; heron-py never ships them. */
public final class Main {
    private Main() {
    }
}
