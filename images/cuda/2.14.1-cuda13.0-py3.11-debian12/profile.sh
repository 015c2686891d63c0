# accel-images: login shells (`bash -l`, ssh) start from /etc/profile, which resets PATH; keep the
# image's Python environment first on it, as the image's ENV PATH does for every other process.
if [ -d /opt/venv/bin ]; then
    case ":${PATH}:" in
        *:/opt/venv/bin:*) ;;
        *) PATH="/opt/venv/bin:${PATH}"; export PATH ;;
    esac
fi
