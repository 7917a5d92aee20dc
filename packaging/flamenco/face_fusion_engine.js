// SPDX-License-Identifier: GPL-3.0-or-later
//
// Flamenco job type "Face Fusion (engine)": a plate swapped by the Face Fusion engine alone, no Blender.
// One analysis task writes the shot analysis next to the output; render tasks over contiguous frame chunks depend
// on it and read it with `swap --analysis` (they never analyse; a missing or stale analysis fails the task).
//
// Install: copy into the `scripts` folder next to the flamenco-manager executable. Give the Manager two two-way
// variables, `facefusion_python` (the engine's Python on each platform) and `facefusion_root` (the folder holding
// engine/), or type the paths in the job settings. Runs in the Manager's goja engine: plain ES2015, no modules.

const JOB_TYPE = {
    label: "Face Fusion (engine)",
    description: "Replace faces in a plate with the Face Fusion engine: one analysis task, then chunked renders",
    settings: [
        { key: "source_photos", type: "string", subtype: "dir_path", required: true, visible: "submission",
          description: "Folder with the photos of the new face (averaged into one identity)" },
        { key: "plate", type: "string", subtype: "file_path", required: true, visible: "submission",
          description: "Plate: a movie, an image, or a sequence such as /shots/sh010/plate.####.exr" },
        { key: "output", type: "string", subtype: "dir_path", required: true, visible: "submission",
          description: "Folder for the EXRs and the shot analysis (on shared storage)" },
        { key: "settings_file", type: "string", subtype: "file_path", required: true, visible: "submission",
          description: "JSON file of Face Fusion settings ({} for the defaults)" },
        { key: "frames", type: "string", required: true, visible: "submission",
          description: "Frames to render: '1-48', or '1-10, 20-30'" },
        { key: "chunk_size", type: "int32", default: 16, propargs: { min: 1 }, visible: "submission",
          description: "Frames per render task" },
        { key: "engine_python", type: "string", default: "{facefusion_python}", visible: "submission",
          description: "The engine's Python on the workers (a Flamenco variable by default)" },
        { key: "engine_root", type: "string", default: "{facefusion_root}", visible: "submission",
          description: "Folder that holds the engine package on the workers" },
        { key: "models_dir", type: "string", default: "", visible: "submission",
          description: "The engine's models folder on the workers (empty: the engine's default)" },
        { key: "consent_file", type: "string", subtype: "file_path", default: "", visible: "submission",
          description: "The shot's consent store (empty: the workers' own); renders stop without a confirmation" },
    ],
};

// Workers run "misc" tasks by default; a studio that keeps the engine on some workers only gives those a
// dedicated type here and in their flamenco-worker.yaml.
const ENGINE_TASK_TYPE = "misc";
const ANALYSIS_NAME = "face-fusion.analysis.npz";
// `python -c BOOT ROOT CONSENT args...`: puts ROOT on sys.path and, when CONSENT is not empty, points the engine at
// that consent store, then runs the engine's command line with the remaining arguments. Both are whole arguments,
// mapped per platform like any path; nothing needs setting up on the worker.
const BOOT = "import os, sys; sys.path.insert(0, sys.argv.pop(1)); c = sys.argv.pop(1); " +
    "os.environ.update({'FACE_FUSION_CONSENT_FILE': c} if c else {}); from engine.cli import main; sys.exit(main())";

function compileJob(job) {
    const s = job.settings;
    const ranges = contiguousChunks(s.frames, s.chunk_size);
    const analysisPath = path.join(s.output, ANALYSIS_NAME);
    const common = ["--target", s.plate, "--analysis", analysisPath, "--settings", s.settings_file].concat(
        s.models_dir ? ["--models-dir", s.models_dir] : []);

    const analyse = author.Task("analyse-shot", ENGINE_TASK_TYPE);
    analyse.addCommand(engineCommand(s, ["analyse"].concat(common, ["--quiet"])));
    job.addTask(analyse);

    for (const r of ranges) {
        const task = author.Task(`render-${r}`, ENGINE_TASK_TYPE);
        task.addCommand(engineCommand(s, ["swap", "--source", s.source_photos, "--output", s.output,
                                          "--frames", r, "--skip-existing", "--quiet"].concat(common)));
        task.addDependency(analyse);
        job.addTask(task);
    }
}

function engineCommand(s, args) {
    return author.Command("exec", { exe: s.engine_python,
                                    args: ["-c", BOOT, s.engine_root, s.consent_file || ""].concat(args) });
}

// "1-10, 20-30" -> ["1-8", "9-10", "20-27", "28-30"] for chunk size 8: chunks never span a gap, so each is one
// `--frames FIRST-LAST` range of the engine.
function contiguousChunks(frames, chunkSize) {
    const size = Math.max(1, Math.floor(chunkSize || 1));
    const out = [];
    for (const part of String(frames).split(",")) {
        const m = part.trim().match(/^(-?\d+)(?:\s*-\s*(-?\d+))?$/);
        if (!m) {
            throw `frame range "${part.trim()}" is not understood; write it as FIRST-LAST, e.g. 1001-1050`;
        }
        const first = parseInt(m[1], 10);
        const last = m[2] === undefined ? first : parseInt(m[2], 10);
        if (last < first) {
            throw `frame range "${part.trim()}" ends before it starts`;
        }
        for (let a = first; a <= last; a += size) {
            const b = Math.min(a + size - 1, last);
            out.push(a === b ? `${a}` : `${a}-${b}`);
        }
    }
    return out;
}
