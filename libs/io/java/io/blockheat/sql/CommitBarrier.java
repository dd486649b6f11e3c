package io.blockheat.sql;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.UncheckedIOException;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.SparkSession;

/**
 * Served readers never see half an ingest: before a statement is parsed, a session of a server waits while the
 * warehouse's journal (JOURNAL in the application's configuration: <warehouse>/_journal, libs.io.journal) holds a
 * decided multi-table commit that is not finished. A live writer finishes its own entry; the server's loop
 * finishes one a stopped writer left within a second. After WAIT_S seconds (default 120) the statement is refused,
 * naming the entry. A session that sets AWAIT to false (blockheat's own jobs and the server's catalog upkeep, which
 * finish the journal themselves) does not wait.
 */
public final class CommitBarrier {
    /** The application's setting: the journal directory to wait on (unset: no waiting). */
    public static final String JOURNAL = "spark.blockheat.journal";
    /** The application's setting: seconds to wait before refusing. */
    public static final String WAIT_S = "spark.blockheat.awaitCommitsSeconds";
    /** The session's setting: false to read without waiting. */
    public static final String AWAIT = "spark.blockheat.awaitCommits";
    static final long POLL_MS = 50;

    private CommitBarrier() {
    }

    /** Return once `session`'s warehouse has no unfinished commit (or when it need not wait). */
    static void await(SparkSession session) {
        SparkConf app = session.sparkContext().getConf();
        String journal = app.get(JOURNAL, "");
        if (journal.isEmpty() || "false".equalsIgnoreCase(session.conf().get(AWAIT, "true").trim())) {
            return;
        }
        double waitS = Double.parseDouble(app.get(WAIT_S, "120"));
        long deadline = System.nanoTime() + (long) (waitS * 1e9);
        Path dir = new Path(journal);
        try {
            FileSystem fs = dir.getFileSystem(session.sparkContext().hadoopConfiguration());
            for (String entry = pending(fs, dir); entry != null; entry = pending(fs, dir)) {
                if (System.nanoTime() >= deadline) {
                    throw new IllegalStateException("the tables are between the commits of an ingest for over "
                        + waitS + " s (journal entry " + entry + "); the query waits for it rather than read half "
                        + "of it: try again once its writer or blockheat serve has finished it");
                }
                Thread.sleep(POLL_MS);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("checking the journal " + journal + " for unfinished commits", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for the journal " + journal, e);
        }
    }

    /** An entry of the journal directory `dir` (a decided commit not finished), or null when there is none. */
    static String pending(FileSystem fs, Path dir) throws IOException {
        FileStatus[] found;
        try {
            found = fs.listStatus(dir);
        } catch (FileNotFoundException e) {
            return null;
        }
        for (FileStatus status : found) {
            if (status.getPath().getName().endsWith(".json")) {
                return status.getPath().toString();
            }
        }
        return null;
    }
}
