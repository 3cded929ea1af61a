from setuptools import find_packages, setup

package_name = 'slide_ros'

setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
    ],
    install_requires=['setuptools'],
    zip_safe=False,
    maintainer='Slide Robotics',
    maintainer_email='engineering@slide-robotics.com',
    description='The rclpy nodes of slide around slide_core.',
    license='Apache-2.0',
    entry_points={
        'console_scripts': [
            'executor_node = slide_ros.executor_node:main',
            'identification_node = slide_ros.identification_node:main',
            'planner_node = slide_ros.planner_node:main',
            'behaviour_node = slide_ros.behaviour_node:main',
            'recorder_node = slide_ros.recorder_node:main',
        ],
    },
)
